#!/usr/bin/env bash
# Packs what a Linux machine with an NVIDIA GPU but without Node, npm, a Vulkan loader or a network needs to
# run this project's CLI and bench through Dawn on its GPU. Run from the project root after `npm ci`:
#   bash scripts/gpu/pack.sh   -> .gpu/ (git-ignored)
# then copy the working tree with .gpu/ to that machine and run, in its project root, e.g.
#   bash .gpu/run.sh npm run bench -- --json out/bench.json
# .gpu/ is about 35 MB. See docs/WEBGPU-LINUX.md ("A real GPU").
set -euo pipefail
[ -f package.json ] && [ -d node_modules ] || { echo "run from the project root after npm ci" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
rm -rf .gpu && mkdir -p .gpu/deb
# Node itself (the device image has none)
xz -T0 -6 -c "$(readlink -f "$(command -v node)")" > .gpu/node.xz
# the runtime part of node_modules: Dawn for linux-x64, the TypeScript loader and the app's dependencies
t=$(mktemp -d); nm=$t/node_modules; mkdir -p "$nm/@esbuild" "$nm/webgpu/dist"
# every runtime dependency package.json names (webgpu apart: only its linux-x64 build), and tsx with esbuild
deps=$(node -e 'console.log(Object.keys(require("./package.json").dependencies).join(" "))')
for p in tsx esbuild $deps; do mkdir -p "$nm/$(dirname "$p")"; cp -rL "node_modules/$p" "$nm/$(dirname "$p")/"; done
rm -f "$nm/esbuild/bin/esbuild"   # a copy of the platform binary below
cp -rL node_modules/@esbuild/linux-x64 "$nm/@esbuild/"
(cd node_modules/webgpu && for f in *; do [ "$f" = dist ] || cp -rL "$f" "$nm/webgpu/"; done)
cp -rL node_modules/webgpu/dist/linux-x64 "$nm/webgpu/dist/"
tar -cJf .gpu/node_modules.tar.xz -C "$t" node_modules
rm -rf "$t"
# the Vulkan loader and glvnd (the NVIDIA driver and its ICD are on the machine; its Vulkan library needs glvnd)
mkdir -p /tmp/gpu-apt/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-apt'
apt-get $o update -qq >/dev/null 2>&1 || true
(cd .gpu/deb && apt-get $o download -qq libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2 >/dev/null 2>&1) || { echo "could not download the Vulkan loader and GL dispatch libraries" >&2; exit 1; }
cp "$here/run.sh" .gpu/run.sh; chmod +x .gpu/run.sh
du -sh .gpu; echo "then, on the GPU machine: bash .gpu/run.sh npm run bench -- --json out/bench.json"
