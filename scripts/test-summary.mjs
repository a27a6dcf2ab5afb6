// Prints the closing line CI reads ("N passed, N failed[, N skipped]") from one or more vitest JSON
// reports (scripts/test.sh writes one per adapter pass). The type check counts as one test.
// Usage: node scripts/test-summary.mjs <typecheck_failed: 0|1> <report.json>...
// A report that is missing (its vitest run crashed before writing it) counts as one failure.
import { readFileSync, existsSync } from 'node:fs';
const [typecheckFailed, ...files] = process.argv.slice(2);
if (typecheckFailed !== '0' && typecheckFailed !== '1') {
  console.error(`test-summary: the first argument must be 0 or 1 (type check failed), got "${typecheckFailed}"`);
  process.exit(2);
}
let passed = 0, failed = 0, skipped = 0;
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
if (typecheckFailed === '1') failed++; else passed++;
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
