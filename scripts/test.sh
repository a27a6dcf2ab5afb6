#!/usr/bin/env bash
# The whole test suite: `npm test`. Provisions the software WebGPU adapters first (lavapipe for
# Node/Dawn, Debian chromium for the browser tests), then type-checks and runs vitest, and ends with
# the line "N passed, N failed" that CI reads.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! provision=$(bash scripts/provision-webgpu.sh); then
  echo "Cannot provision a WebGPU adapter (see the error above); GPU tests are not skipped, they fail." >&2
  echo "0 passed, 1 failed"
  exit 1
fi
eval "$provision"
mkdir -p test-results
typecheck_failed=0
if ! npx tsc --noEmit -p tsconfig.json; then typecheck_failed=1; echo "typecheck FAILED" >&2; fi
npx vitest run --reporter=default --reporter=json --outputFile.json=test-results/vitest.json "$@"
rc=$?
node scripts/test-summary.mjs test-results/vitest.json "$typecheck_failed"
[ "$typecheck_failed" = 0 ] || rc=1
exit $rc
