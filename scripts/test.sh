#!/usr/bin/env bash
# The whole test suite: `npm test` (or `bash scripts/test.sh <paths>` for part of it). Provisions the
# software WebGPU adapters first (lavapipe for Node/Dawn, Debian chromium for the browser tests), then
# type-checks, lints and format-checks (Biome), and runs vitest on lavapipe. The kernel tests then run a second time on SwiftShader
# (another subgroup size and other limits), some with the GPU kernel family forced, the exactness tests under the
# compiler fuzzer, and a set under each browser limit profile. Ends with the line "N passed, N failed" that CI
# reads, summed over every pass.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! provision=$(bash scripts/provision-webgpu.sh); then
  echo "Cannot provision a WebGPU adapter (see the error above); GPU tests are not skipped, they fail." >&2
  echo "0 passed, 1 failed"
  exit 1
fi
eval "$provision"
# Reports are written to a private folder, then moved to test-results/ at the end: two runs at once
# (several worktrees or terminals) must not sum each other's reports.
mkdir -p test-results
results=$(mktemp -d test-results/.run.XXXXXX)
trap 'rm -rf "$results"' EXIT
typecheck_failed=0
if ! npx tsc --noEmit -p tsconfig.json; then typecheck_failed=1; echo "typecheck FAILED" >&2; fi
# Lint (import cycles included) and format check, one tool configured in biome.jsonc; `npm run lint` runs the same
# static checks (type check, Biome, layering, sizes) on their own.
lint_failed=0
if ! npx biome ci --colors=off .; then lint_failed=1; echo "lint/format check FAILED (npx biome check --write . fixes formatting)" >&2; fi
# The layering of src/ (docs/ARCHITECTURE.md): no import against the declared order of the folders.
if ! node scripts/check-layers.mjs; then lint_failed=1; echo "layering check FAILED" >&2; fi
# Readable sizes: no file of src/ over 600 lines, no function over 150 (scripts/check-sizes.mjs).
if ! node scripts/check-sizes.mjs; then lint_failed=1; echo "size check FAILED" >&2; fi

# run_vitest <json report> <vitest args...>
run_vitest() {
  local report=$1
  shift
  npx vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@"
}
# report_has <json report> <test file>: did that vitest run include the file?
report_has() { grep -q "\"name\":\"[^\"]*/$2\"" "$1" 2>/dev/null; }

# Pass 1: the selected tests (all by default) on lavapipe.
RINGSIDE_ADAPTER=lavapipe run_vitest "$results/vitest.json" "$@"
rc=$?
reports=("$results/vitest.json")

# Pass 2: the kernel tests again on SwiftShader, those of them that pass 1 ran. RINGSIDE_ADAPTER makes
# the tests check that Dawn really picked SwiftShader.
swiftshader_tests=(test/gpu/kernels-matmul.test.ts test/gpu/kernels-attention.test.ts test/gpu/kernels-norm-rope.test.ts
  test/gpu/kernels-elementwise.test.ts test/gpu/fused-ops.test.ts)
# Every inexact policy's variant with its mechanism off equals the exact kernel on this adapter too.
swiftshader_tests+=(test/gpu/policy-twins.test.ts)
rerun=()
for f in "${swiftshader_tests[@]}"; do report_has "$results/vitest.json" "$f" && rerun+=("$f"); done
if [ ${#rerun[@]} -gt 0 ]; then
  echo "--- again on SwiftShader: ${rerun[*]}"
  VK_ICD_FILENAMES="$RINGSIDE_SWIFTSHADER_ICD" RINGSIDE_ADAPTER=swiftshader \
    run_vitest "$results/vitest-swiftshader.json" "${rerun[@]}" || rc=1
  reports+=("$results/vitest-swiftshader.json")
fi

# Pass 3: the GPU kernel family (src/gpu/kernel-class.ts: coop matvec, workgroup norms, fused steps),
# forced on lavapipe, over the kernel, exactness, golden and MTP tests that pass 1 ran: CI checks the
# path real GPUs take, not only the one software adapters take.
# mtp.test.ts runs its fixture, chained-decode and K = 4 long-generation tests there: the GPU kernels are
# slow on a CPU adapter (its other long generations took 8 minutes), and K = 2, 3, 8 add nothing kernel-wise.
gpu_class_tests=(test/gpu/kernels-matmul.test.ts test/gpu/kernels-attention.test.ts test/gpu/kernels-norm-rope.test.ts
  test/gpu/kernels-elementwise.test.ts test/gpu/fused-ops.test.ts test/gpu/exactness.test.ts test/gpu/probe.test.ts
  test/gpu/target-golden.test.ts test/gpu/assistant.test.ts test/gpu/trace.test.ts test/gpu/bench.test.ts)
# ... and equals the exact kernel of the GPU class (coop, fused attention) there.
gpu_class_tests+=(test/gpu/policy-twins.test.ts)
# The k-major weight layout the GPU class uploads gives every kernel the bytes of MLX's (skipped in pass 1).
gpu_class_tests+=(test/gpu/weight-layout.test.ts)
# The exactness self-test through the GPU class, and its faults rewritten in matmul_coop.wgsl and combine_fused.
gpu_class_tests+=(test/gpu/exactness-selftest.test.ts)
# The other families' engines take the same GPU-class kernels on a real GPU: their goldens and block == chain too.
gpu_class_tests+=(test/gpu/gemma4-e-golden.test.ts test/gpu/gemma4-e-exactness.test.ts test/gpu/gemma4-moe-golden.test.ts
  test/gpu/gemma4-moe-exactness.test.ts test/gpu/qwen-target.test.ts test/gpu/qwen-probe.test.ts)
rerun=()
for f in "${gpu_class_tests[@]}"; do report_has "$results/vitest.json" "$f" && rerun+=("$f"); done
if [ ${#rerun[@]} -gt 0 ]; then
  echo "--- again with the GPU kernel family forced (RINGSIDE_KERNELS=gpu): ${rerun[*]}"
  RINGSIDE_KERNELS=gpu RINGSIDE_ADAPTER=lavapipe run_vitest "$results/vitest-gpu-kernels.json" "${rerun[@]}" || rc=1
  reports+=("$results/vitest-gpu-kernels.json")
fi
if report_has "$results/vitest.json" test/gpu/mtp.test.ts; then
  echo "--- again with the GPU kernel family forced: test/gpu/mtp.test.ts (fixture, chained, K = 4)"
  RINGSIDE_KERNELS=gpu RINGSIDE_ADAPTER=lavapipe run_vitest "$results/vitest-gpu-kernels-mtp.json" test/gpu/mtp.test.ts \
    -t 'fixture greedy tokens|chained greedy steps|ten times, K = 4' || rc=1
  reports+=("$results/vitest-gpu-kernels-mtp.json")
fi

# Pass 4: exactness under the compiler fuzzer (src/gpu/wgsl-fuzz/config.ts): every pipeline compiled from a source
# rewritten, at sites chosen by the seed, as a relaxed-math compiler (Metal's, on a Mac) may compile it: products
# fused into adds, sums regrouped, divisions by reciprocals, compensation terms dropped. A verify row must still equal
# its chain step byte for byte, which holds only where both run the same code. One seed per mode over the software
# kernel family, the block == chain, probe, trace and MTP == classic tests of each family, that pass 1 ran. Every
# seed compiles the engine's pipelines anew (a cold Mesa shader cache), hence a subset. The GPU kernel family's
# cold compile under a seed takes minutes here (~3 for exactness.test.ts): its fuzzed runs are a manual pass
# (docs/NUMERICS.md, "The compiler fuzzer").
fuzz_runs=(
  "contract:11|test/gpu/exactness.test.ts test/gpu/gemma4-moe-exactness.test.ts|"
  "reassoc:12|test/gpu/probe.test.ts test/gpu/gemma4-e-exactness.test.ts|exact passes|K = 2, 3, 4, 8|rollback"
  "all:13|test/gpu/qwen-probe.test.ts test/gpu/mtp.test.ts test/gpu/trace.test.ts|exact passes|fixture greedy tokens|exact:"
)
for run in "${fuzz_runs[@]}"; do
  IFS='|' read -r spec files filter <<<"$run"
  rerun=()
  for f in $files; do report_has "$results/vitest.json" "$f" && rerun+=("$f"); done
  [ ${#rerun[@]} -gt 0 ] || continue
  echo "--- again under the compiler fuzzer (RINGSIDE_WGSL_FUZZ=$spec): ${rerun[*]}"
  report="$results/vitest-wgsl-fuzz-${spec%%:*}.json"
  RINGSIDE_WGSL_FUZZ=$spec RINGSIDE_ADAPTER=lavapipe run_vitest "$report" "${rerun[@]}" ${filter:+-t "$filter"} || rc=1
  reports+=("$report")
done
# Passes 4 and 5: the device capped to a browser's limits and features on a Mac (src/gpu/limit-profiles.ts,
# RINGSIDE_LIMITS), over the tests of that list that pass 1 ran: the limit-profile and exactness tests, the probe's
# exact runs (its inexact policies test mechanisms, not limits) and the fused gate_up_sums kernel; -t keeps the
# files' other tests out. lavapipe is within Safari's caps but for its subgroups, which only the software
# family's lanes matvec uses: the Safari pass runs that family without them. Chrome's 10 storage buffers per
# stage bind the GPU family, whose fused rmsnorm qkv_rows and matmul_coop gate_up_sums take exactly 10: the
# Chrome pass forces that family. Their pipelines are in Mesa's shader cache from passes 1 and 3. The Chrome pass
# leaves exactness.test.ts out: the probe's exact runs check block == chain through the same GPU-family kernels
# under the same caps, and that file's rollback test alone took half the pass.
for profile in safari chrome-mac; do
  profile_tests=(test/gpu/limit-profiles.test.ts test/gpu/probe.test.ts test/gpu/fused-ops.test.ts)
  [ "$profile" = safari ] && profile_tests+=(test/gpu/exactness.test.ts)
  rerun=()
  for f in "${profile_tests[@]}"; do report_has "$results/vitest.json" "$f" && rerun+=("$f"); done
  [ ${#rerun[@]} -gt 0 ] || break
  kernels=$([ "$profile" = chrome-mac ] && echo gpu)
  echo "--- again under the $profile limit profile (RINGSIDE_LIMITS=$profile${kernels:+, RINGSIDE_KERNELS=$kernels}): ${rerun[*]}"
  RINGSIDE_LIMITS=$profile RINGSIDE_KERNELS=$kernels RINGSIDE_ADAPTER=lavapipe \
    run_vitest "$results/vitest-limits-$profile.json" "${rerun[@]}" \
    -t 'browser limit profiles|exact policy|exact passes|gate_up_sums' || rc=1
  reports+=("$results/vitest-limits-$profile.json")
done

node scripts/test-summary.mjs "$typecheck_failed" "$lint_failed" "${reports[@]}"
mv -f "${reports[@]}" test-results/ 2>/dev/null
[ "$typecheck_failed" = 0 ] && [ "$lint_failed" = 0 ] || rc=1
exit $rc
