#!/usr/bin/env bash
# Finds or provisions the software WebGPU adapters the test suite needs on a GPU-less Linux machine
# (see docs/WEBGPU-LINUX.md):
#   - Node + Dawn: a Vulkan loader (libvulkan1) and Mesa >= 25 lavapipe. Debian 12's own lavapipe
#     (Mesa 22) is refused by Dawn, so the backports package is downloaded and unpacked privately
#     into .cache/lavapipe (not installed system-wide).
#   - Browser tests: Debian's chromium (with its SwiftShader Vulkan driver).
#   - A second Node/Dawn adapter: Chromium's SwiftShader Vulkan ICD (other subgroup size and limits),
#     on which scripts/test.sh reruns the kernel tests. Exported as RINGSIDE_SWIFTSHADER_ICD.
# Prints `export` lines for the caller to eval. Fails loudly (never skips) when it cannot provision.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache/lavapipe"
icd="$cache/lvp_icd.json"
log() { echo "[provision] $*" >&2; }
fail() { echo "[provision] ERROR: $*" >&2; exit 1; }

need_apt=()
[ -e /usr/lib/x86_64-linux-gnu/libvulkan.so.1 ] || need_apt+=(libvulkan1)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "missing ${need_apt[*]}; run as root or install them: apt-get install -y ${need_apt[*]}"
  command -v apt-get >/dev/null || fail "missing ${need_apt[*]} and this is not a Debian system: install a Vulkan loader and Chromium yourself"
  log "installing ${need_apt[*]} with apt-get"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >&2
fi

if [ ! -f "$icd" ]; then
  command -v apt-get >/dev/null || fail "no Mesa 25 lavapipe at $icd and no apt-get to fetch it"
  # The machine's own Debian mirror: first URIs: line of deb822 sources, else first plain deb line.
  mirror=$( { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}';
              grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}'; } | grep -v security | head -1 || true)
  [ -n "$mirror" ] || mirror="http://deb.debian.org/debian"
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  work=$(mktemp -d)
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$cache"
  if [ "$codename" = bookworm ]; then suite="bookworm-backports"; else suite="$codename"; fi
  echo "deb $mirror $suite main" > "$work/sources.list"
  opts=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache" -o APT::Sandbox::User=root)
  log "downloading mesa-vulkan-drivers from $suite ($mirror)"
  apt-get "${opts[@]}" update -qq >&2 || fail "apt-get update of $suite failed"
  (cd "$work" && apt-get "${opts[@]}" download mesa-vulkan-drivers >&2) || fail "apt-get download mesa-vulkan-drivers failed"
  dpkg-deb -x "$work"/mesa-vulkan-drivers_*.deb "$work/x"
  cp "$work/x/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so" "$cache/"
  # lavapipe links against LLVM and a few libs that the backports package depends on; check them.
  missing=$(ldd "$cache/libvulkan_lvp.so" | awk '/not found/{print $1}' || true)
  if [ -n "$missing" ]; then
    log "lavapipe needs: $missing; installing its dependencies"
    deps=$(dpkg-deb -f "$work"/mesa-vulkan-drivers_*.deb Depends | tr ',' '\n' | sed -E 's/\(.*\)//; s/\|.*//; s/^ +| +$//g' | grep -v '^$' | grep -vE '^(libc6|libvulkan1)$' || true)
    (cd "$work" && apt-get "${opts[@]}" download $deps >&2) || true
    for d in "$work"/*.deb; do dpkg-deb -x "$d" "$work/x"; done
    for m in $missing; do f=$(find "$work/x" -name "$m" | head -1); [ -n "$f" ] && cp -L "$f" "$cache/"; done
  fi
  printf '{"file_format_version":"1.0.0","ICD":{"library_path":"%s","api_version":"1.4.305"}}\n' "$cache/libvulkan_lvp.so" > "$icd"
  rm -rf "$work"
  log "lavapipe ready at $cache"
fi
# Debian's chromium package ships SwiftShader's Vulkan ICD next to the browser (RINGSIDE_SWIFTSHADER_ICD
# set beforehand points elsewhere).
swiftshader_icd=${RINGSIDE_SWIFTSHADER_ICD:-/usr/lib/chromium/vk_swiftshader_icd.json}
[ -f "$swiftshader_icd" ] || fail "no SwiftShader Vulkan ICD at $swiftshader_icd (Debian's chromium package ships it: apt-get install --reinstall chromium)"
swiftshader_lib=$(sed -nE 's/.*"library_path" *: *"([^"]+)".*/\1/p' "$swiftshader_icd")
case "$swiftshader_lib" in /*) ;; *) swiftshader_lib="$(dirname "$swiftshader_icd")/$swiftshader_lib" ;; esac
[ -f "$swiftshader_lib" ] || fail "the SwiftShader ICD $swiftshader_icd names a driver that does not exist: $swiftshader_lib"

mkdir -p "$root/.cache/xdg" && chmod 700 "$root/.cache/xdg"
echo "export VK_ICD_FILENAMES='$icd'"
echo "export LD_LIBRARY_PATH='$cache'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
echo "export XDG_RUNTIME_DIR='$root/.cache/xdg'"
echo "export RINGSIDE_CHROMIUM=/usr/bin/chromium"
echo "export RINGSIDE_SWIFTSHADER_ICD='$swiftshader_icd'"
