import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { validateReport, REPORT_SCHEMA } from '../../src/parity/report.ts';
import { compareRows } from '../../src/parity/compare.ts';
import { probeDraw, defaultDrawLengths } from '../../src/parity/draws.ts';

describe('report schema validation', () => {
  it('rejects non-objects, wrong schema and broken draws with specific problems', () => {
    expect(validateReport(null)).toEqual(['report is not a JSON object']);
    const problems = validateReport({ schema: 'other/9', kind: 'probe', verdict: 'maybe', draws: [{ verdict: 'x' }] });
    expect(problems).toContain(`schema must be "${REPORT_SCHEMA}" (found "other/9")`);
    expect(problems).toContain('verdict must be "equal" or "diverges"');
    expect(problems).toContain('provenance missing');
    expect(problems.some((p) => p.startsWith('draws[0]'))).toBe(true);
  });
});

describe('probe draws (mlxcel formula)', () => {
  it('uses salt 977 d + 1 and the prompt/block formulas, mod V', () => {
    const d = probeDraw(1, 3, 4, 262144);
    expect(d.salt).toBe(978);
    expect(d.prompt).toEqual([979, 986, 993]);
    expect(d.block).toEqual([981, 994, 1007, 1020]);
    expect(probeDraw(0, 2, 1, 5).prompt).toEqual([2, 4]);
    expect(defaultDrawLengths(1024)).toEqual([8, 8, 8, 1056]);
    expect(defaultDrawLengths(2048)).toEqual([8, 8, 8, 1536]);
  });

  it('the fixture prompt is draw 1 of length 40 with V = 1024', () => {
    const golden = JSON.parse(readFileSync('test/fixtures/tiny-a/golden.json', 'utf8'));
    expect(probeDraw(1, 40, 1, 1024).prompt).toEqual(golden.prompt.map((t: number) => t));
  });
});

describe('row comparison in storage format', () => {
  it('counts differing bytes and ULPs in f32 and in bf16 (upper halves only)', () => {
    const a = new Float32Array([1, 2, 3, -4]);
    const b = new Float32Array(a);
    const u = new Uint32Array(b.buffer);
    u[1] += 1; // 1 ulp in f32, invisible in bf16
    u[3] += 1 << 16; // 1 bf16 ulp (2 f32 bytes differ... only byte 2 here)
    const f = compareRows(a, b, 'f32', 0);
    expect(f.bytesTotal).toBe(16);
    expect(f.bytesDiffering).toBe(2);
    expect(f.maxUlp).toBe(65536);
    const h = compareRows(a, b, 'bf16', 0);
    expect(h.bytesTotal).toBe(8);
    expect(h.bytesDiffering).toBe(1);
    expect(h.maxUlp).toBe(1);
  });
});
