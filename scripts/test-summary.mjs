// Prints the closing line CI reads ("N passed, N failed[, N skipped]") from vitest's JSON report.
// The type check counts as one test.
import { readFileSync, existsSync } from 'node:fs';
const [file, typecheckFailed] = process.argv.slice(2);
let passed = 0, failed = 0, skipped = 0;
if (existsSync(file)) {
  const r = JSON.parse(readFileSync(file, 'utf8'));
  passed = r.numPassedTests;
  failed = r.numFailedTests + (r.numRuntimeErrorTestSuites ?? 0);
  skipped = r.numPendingTests + (r.numTodoTests ?? 0);
  // A test file that failed to load has no tests but is a failure.
  for (const s of r.testResults ?? []) if (s.status === 'failed' && (s.assertionResults ?? []).length === 0) failed++;
} else {
  failed = 1;
}
if (typecheckFailed === '1') failed++; else passed++;
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
