// Prints the closing line CI reads ("N passed, N failed[, N skipped]") from one or more vitest JSON
// reports (scripts/test.sh writes one per adapter pass). The type check and the lint/format check
// (Biome) count as one test each.
// Usage: node scripts/test-summary.mjs <typecheck_failed: 0|1> <lint_failed: 0|1> <report.json>...
// A report that is missing (its vitest run crashed before writing it) counts as one failure.
import { readFileSync, existsSync } from 'node:fs';
const [typecheckFailed, lintFailed, ...files] = process.argv.slice(2);
for (const [what, flag] of [
  ['type check', typecheckFailed],
  ['lint', lintFailed],
]) {
  if (flag !== '0' && flag !== '1') {
    console.error(`test-summary: the ${what} flag must be 0 or 1, got "${flag}"`);
    process.exit(2);
  }
}
let passed = 0,
  failed = 0,
  skipped = 0;
for (const file of files) {
  if (!existsSync(file)) {
    console.error(`test-summary: no report at ${file}: counted as one failure`);
    failed++;
    continue;
  }
  const r = JSON.parse(readFileSync(file, 'utf8'));
  passed += r.numPassedTests;
  failed += r.numFailedTests + (r.numRuntimeErrorTestSuites ?? 0);
  skipped += r.numPendingTests + (r.numTodoTests ?? 0);
  // A test file that failed without a failed test is one failure: it failed to load, or a hook
  // (beforeAll: no adapter, the wrong adapter) failed and vitest reports its tests as skipped.
  for (const s of r.testResults ?? []) {
    if (s.status === 'failed' && !(s.assertionResults ?? []).some((a) => a.status === 'failed')) failed++;
  }
}
if (files.length === 0) failed++;
for (const flag of [typecheckFailed, lintFailed]) {
  if (flag === '1') failed++;
  else passed++;
}
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
