#!/usr/bin/env bash
# GPU-machine side of pack.sh: unpacks Node, node_modules and the Vulkan loader once per machine,
# points Dawn at the NVIDIA driver, then runs its arguments in the project root, e.g.
#   bash .gpu/run.sh npm run cli -- info
#   bash .gpu/run.sh npm run bench -- --json $OUT/bench.json
# `npm run cli|bench -- ARGS` is understood without npm (the machine has none) and runs the bundled CLI
# (bundle.mjs; RINGSIDE_SHADERS=DIR still swaps in shader files for A/B measurements).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd); cd "$root"
if [ ! -e /tmp/.ringside-gpu-ready ] || [ ! -d node_modules/webgpu ]; then
  for f in .gpu/deb/*.deb; do dpkg -x "$f" /; done; ldconfig
  command -v node >/dev/null || { xz -dc .gpu/node.xz > /usr/local/bin/node; chmod +x /usr/local/bin/node; }
  rm -rf node_modules && tar -xJf .gpu/node_modules.tar.xz
  cat > /usr/local/bin/npm <<'SH'
#!/usr/bin/env bash
# `npm run [--silent] cli|bench [-- ARGS]` without npm
[ "${1:-}" = run ] || { echo "npm shim: only 'npm run cli|bench' is available here" >&2; exit 2; }
shift; [ "${1:-}" = --silent ] && shift; s=${1:-}; shift || true; [ "${1:-}" = -- ] && shift
case $s in cli) ;; bench) set -- bench "$@" ;; *) echo "npm shim: unknown script $s" >&2; exit 2 ;; esac
exec node .gpu/bundle/cli.mjs "$@"
SH
  chmod +x /usr/local/bin/npm; touch /tmp/.ringside-gpu-ready
fi
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json}
unset VK_ICD_FILENAMES
export RINGSIDE_COMMIT=${RINGSIDE_COMMIT:-$(cat .gpu/commit 2>/dev/null)}
exec "$@"
