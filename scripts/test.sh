#!/usr/bin/env bash
# The whole test suite: `npm test` (or `bash scripts/test.sh <paths>` for part of it). Provisions the
# software WebGPU adapters first (lavapipe for Node/Dawn, Debian chromium for the browser tests), then
# type-checks, lints and format-checks (Biome), and runs vitest on lavapipe. The kernel tests then run a second time on SwiftShader
# (another subgroup size and other limits). Ends with the line "N passed, N failed" that CI reads,
# summed over both passes.
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
# static checks (type check, Biome, layering) on their own.
lint_failed=0
if ! npx biome ci --colors=off .; then lint_failed=1; echo "lint/format check FAILED (npx biome check --write . fixes formatting)" >&2; fi
# The layering of src/ (docs/ARCHITECTURE.md): no import against the declared order of the folders.
if ! node scripts/check-layers.mjs; then lint_failed=1; echo "layering check FAILED" >&2; fi

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
    -t 'fixture greedy tokens|chained greedy steps|many times, K = 4' || rc=1
  reports+=("$results/vitest-gpu-kernels-mtp.json")
fi

node scripts/test-summary.mjs "$typecheck_failed" "$lint_failed" "${reports[@]}"
mv -f "${reports[@]}" test-results/ 2>/dev/null
[ "$typecheck_failed" = 0 ] && [ "$lint_failed" = 0 ] || rc=1
exit $rc
