#!/usr/bin/env bash
# Packs what a Linux machine with an NVIDIA GPU but without Node, npm, a Vulkan loader or a network needs to
# run this project's CLI and bench through Dawn on its GPU. Run from the project root after `npm ci`:
#   bash scripts/gpu/pack.sh   -> .gpu/ (git-ignored)
# then copy the working tree with .gpu/ to that machine and run, in its project root, e.g.
#   bash .gpu/run.sh npm run bench -- --json out/bench.json
# .gpu/ is about 27 MB, so that it and the tracked tree (about 37 MB) travel within 64 MiB. See docs/WEBGPU-LINUX.md ("A real GPU").
set -euo pipefail
[ -f package.json ] && [ -d node_modules ] || { echo "run from the project root after npm ci" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
rm -rf .gpu && mkdir -p .gpu/deb
# Node itself (the device image has none), without its symbols
strip -o .gpu/node "$(readlink -f "$(command -v node)")"
xz -T0 -9e -c .gpu/node > .gpu/node.xz && rm .gpu/node
# the CLI and the app's dependencies in one module (bundle.mjs: no TypeScript loader on the machine), and Dawn for
# linux-x64, the one package the bundle leaves out
node "$here/bundle.mjs" .gpu/bundle/cli.mjs
t=$(mktemp -d); mkdir -p "$t/node_modules/webgpu/dist"
(cd node_modules/webgpu && for f in *; do [ "$f" = dist ] || cp -rL "$f" "$t/node_modules/webgpu/"; done)
cp -rL node_modules/webgpu/dist/linux-x64 "$t/node_modules/webgpu/dist/"
# without its symbol tables: 4 MB less to unpack, 0.4 MB less packed
strip --strip-unneeded "$t/node_modules/webgpu/dist/linux-x64/dawn.node"
tar -cf - -C "$t" node_modules | xz -T0 -9e > .gpu/node_modules.tar.xz
rm -rf "$t"
# the commit the reports name (the machine's copy of the tree has no .git)
head=$(git rev-parse --short=12 HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then echo "$head+changes"; else echo "$head"; fi > .gpu/commit
# the Vulkan loader and glvnd (the NVIDIA driver and its ICD are on the machine; its Vulkan library needs glvnd)
mkdir -p /tmp/gpu-apt/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-apt'
apt-get $o update -qq >/dev/null 2>&1 || true
(cd .gpu/deb && apt-get $o download -qq libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2 >/dev/null 2>&1) || { echo "could not download the Vulkan loader and GL dispatch libraries" >&2; exit 1; }
cp "$here/run.sh" .gpu/run.sh; chmod +x .gpu/run.sh
du -sh .gpu; echo "then, on the GPU machine: bash .gpu/run.sh npm run bench -- --json out/bench.json"
