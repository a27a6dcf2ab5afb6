/**
 * Reports the CLI writes render in the page unchanged: a probe report (ring-chronological, draws 8 and
 * 48, localized) and a trace report (mask-widened, prefix 40, 24 traced), each written by `npm run cli`
 * on Dawn (lavapipe under scripts/test.sh), opened through "Open a report (JSON)", and what the page
 * shows is checked against the JSON: verdict, summary, first divergence, draws, rows, metrics, buckets.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newPage, pageErrors, screenshot, useServerAndBrowser } from './harness.ts';
import { ASSISTANT_DIR, TARGET_DIR } from './flows.ts';
import { validateReport, type ProbeReport } from '../../src/parity/report.ts';
import type { TraceReport } from '../../src/parity/trace.ts';
import { defaultDetailDraw } from '../../src/ui/report/report-model.ts';
import { shortDigest } from '../../src/ui/common/format.ts';
import { expectedBuckets, expectedMetrics, shownBuckets, shownMetrics } from './trace-expect.ts';

const CLI_MS = 300_000;

/** `npm run -s cli -- args…` in the repository; resolves with the exit code and output. */
function cli(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', '-s', 'cli', '--', ...args], {
      cwd: path.resolve('.'),
      env: process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), CLI_MS);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

describe('CLI-written reports in the page', () => {
  const env = useServerAndBrowser();
  let tmp: string;
  let probe: ProbeReport;
  let trace: TraceReport;
  beforeAll(async () => {
    tmp = mkdtempSync(path.join(tmpdir(), 'ringside-cli-report-'));
    const probeFile = path.join(tmp, 'probe.json');
    const traceFile = path.join(tmp, 'trace.json');
    const p = await cli([
      'probe',
      '--target',
      TARGET_DIR,
      '--draft',
      ASSISTANT_DIR,
      '--policy',
      'ring-chronological',
      '--lengths',
      '8,48',
      '--report',
      probeFile,
    ]);
    // Exit 3: the probe diverges (the long draw wraps the 16-slot ring).
    expect(p.code, p.out).toBe(3);
    const t = await cli([
      'trace',
      '--target',
      TARGET_DIR,
      '--prefix',
      '40',
      '--traced',
      '24',
      '--policy',
      'mask-widened',
      '--report',
      traceFile,
    ]);
    probe = JSON.parse(readFileSync(probeFile, 'utf8'));
    trace = JSON.parse(readFileSync(traceFile, 'utf8'));
    // as the probe: exit 0 when every block row equals the chain, 3 when one differs
    expect(t.code, t.out).toBe(trace.verdict === 'equal' ? 0 : 3);
  }, 2 * CLI_MS);
  afterAll(() => {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('a CLI probe report: verdict, summary, consequence, first divergence, draws, rows, timings and provenance match the JSON', async () => {
    expect(validateReport(probe)).toEqual([]);
    expect(probe.verdict).toBe('diverges');
    const page = await newPage(env.browser, env.url);
    await page.getByTestId('open-report').setInputFiles(path.join(tmp, 'probe.json'));
    const verdict = page.getByTestId('verdict');
    await expect.poll(() => verdict.getAttribute('data-verdict'), { timeout: 30_000 }).toBe(probe.verdict);
    expect(await page.getByTestId('report-title').textContent()).toBe('Block-versus-chain probe report');
    expect(await page.getByTestId('report-source').textContent()).toBe('file probe.json');
    expect(await page.getByTestId('summary').textContent()).toBe(probe.summary);
    expect(await page.getByTestId('consequence').textContent()).toBe(probe.consequence);
    const fd = probe.draws.find((d) => d.firstDivergence)!.firstDivergence!;
    expect(await page.getByTestId('first-divergence').textContent()).toBe(fd.text);
    const draws = await page.getByTestId('draws').locator('li').allTextContents();
    expect(draws.length).toBe(2);
    probe.draws.forEach((d, i) => {
      expect(draws[i]).toBe(`${d.verdict} draw ${d.index} (prompt ${d.promptLength} tokens): ${d.text}`);
    });
    const shown = defaultDetailDraw(probe);
    expect(await page.getByTestId('detail-draw').inputValue()).toBe(String(shown));
    const rows = page.getByTestId('rows-table').locator('tbody tr');
    expect(await rows.count()).toBe(probe.draws[shown].rows.length);
    expect(await page.getByTestId('rows-table').locator('tbody tr.ne').count()).toBe(
      probe.draws[shown].rows.filter((r) => r.bytesDiffering > 0).length,
    );
    const first = probe.draws[shown].rows[0];
    expect(await rows.first().locator('td').nth(1).textContent()).toMatch(
      new RegExp(`^${first.bytesDiffering.toLocaleString('en-US')} of ${first.bytesTotal.toLocaleString('en-US')}`),
    );
    expect(await page.getByTestId('heatmap').isVisible()).toBe(true);
    expect(await page.getByTestId('heatmap-readout').textContent()).toMatch(/first divergence$/);
    expect(await page.getByTestId('timings').locator('tbody tr').count()).toBe(2);
    const prov = await page.getByTestId('provenance').textContent();
    expect(prov).toContain('Policyring-chronological');
    expect(prov).toContain('Draw lengths8; 48');
    expect(prov).toContain(`digest ${shortDigest(probe.provenance.target.digest)}`);
    expect(prov).toContain(`digest ${shortDigest(probe.provenance.assistant!.digest)}`);
    expect(prov).toContain(`Platform${probe.provenance.platform}`);
    await screenshot(page, '21-cli-probe-report');
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it('a CLI trace report: verdict, summary, metrics, buckets, positions and provenance match the JSON', async () => {
    expect(validateReport(trace)).toEqual([]);
    expect(trace.kind).toBe('trace');
    const page = await newPage(env.browser, env.url);
    await page.getByTestId('open-report').setInputFiles(path.join(tmp, 'trace.json'));
    const verdict = page.getByTestId('trace-verdict');
    await expect.poll(() => verdict.getAttribute('data-verdict'), { timeout: 30_000 }).toBe(trace.verdict);
    expect(await page.getByTestId('report-title').textContent()).toBe('Teacher-forced trace report');
    expect(await page.getByTestId('trace-summary').textContent()).toBe(trace.summary);
    expect(await page.getByTestId('trace-setup').textContent()).toBe(
      '24 traced positions after a prefix of 40 tokens · K = 4 · policy mask-widened · f32',
    );
    expect(await shownMetrics(page)).toMatchObject(expectedMetrics(trace));
    expect(await shownBuckets(page)).toEqual(expectedBuckets(trace));
    const dis = trace.positions.filter((p) => !p.agree).length;
    if (dis) expect(await page.getByTestId('trace-disagreements').locator('tbody tr').count()).toBe(dis);
    else expect(await page.getByTestId('trace-no-disagreement').textContent()).toMatch(/at all 24 traced positions/);
    expect(await page.getByTestId('trace-chart').isVisible()).toBe(true);
    await page.locator('.all-positions summary').click();
    const cells = page.getByTestId('trace-all-positions').locator('tbody tr').first().locator('td');
    await expect.poll(() => cells.first().textContent()).toBe(String(trace.positions[0].position));
    expect(await cells.nth(1).textContent()).toBe(String(trace.positions[0].next));
    const prov = await page.getByTestId('trace-provenance').textContent();
    expect(prov).toContain('Policymask-widened');
    expect(prov).toContain('Prefix40Traced positions24');
    expect(prov).toContain(`digest ${shortDigest(trace.provenance.target.digest)}`);
    await screenshot(page, '22-cli-trace-report');
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });
});
