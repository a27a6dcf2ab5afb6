/**
 * mlxcel's logit-trace TSV (src/format/logit-trace-tsv.ts): numbers printed as Rust's `{:.6}` prints them, a file in
 * mlxcel's own layout read, what is written read back, and each malformed line refused with its file, line and field.
 */
import { describe, expect, it } from 'vitest';
import {
  fixed6,
  formatLogitTraceTsv,
  metaValue,
  parseLogitTraceTsv,
  type LogitTrace,
} from '../../src/format/logit-trace-tsv.ts';

/** A small deterministic generator. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x297a2d39) >>> 0;
    return s / 2 ** 32;
  };
}

describe('fixed6: numbers as mlxcel writes them', () => {
  it('rounds an exact tie half to even, as Rust does (JavaScript toFixed rounds it away from zero)', () => {
    // 2^-7 = 0.0078125 and 3 * 2^-7 = 0.0234375 are f32 values exactly half-way between two 6-decimal numbers
    expect(fixed6(2 ** -7)).toBe('0.007812');
    expect((2 ** -7).toFixed(6)).toBe('0.007813');
    expect(fixed6(3 * 2 ** -7)).toBe('0.023438');
    expect(fixed6(-(2 ** -7))).toBe('-0.007812');
    expect(fixed6(12.5 + 2 ** -7)).toBe('12.507812');
  });

  it('keeps the sign of a negative number that rounds to zero, prints whole numbers with 6 zeros', () => {
    expect(fixed6(-1e-7)).toBe('-0.000000');
    expect(fixed6(1e-7)).toBe('0.000000');
    expect(fixed6(0)).toBe('0.000000');
    expect(fixed6(-3)).toBe('-3.000000');
    expect(fixed6(123456789)).toBe('123456789.000000');
    expect(fixed6(2 ** -1074)).toBe('0.000000');
  });

  it('equals toFixed(6) on f32 values that are not ties (toFixed is exact there)', () => {
    const rand = rng(11);
    const f = new Float32Array(1);
    for (let i = 0; i < 20000; i++) {
      f[0] = (rand() - 0.5) * 10 ** (rand() * 8 - 4);
      const x = f[0];
      // a tie x 1e6 = k + 1/2 is exact in double (k < 2^52), so this finds every one
      const scaled = x * 1e6;
      if (Math.abs(scaled - Math.trunc(scaled)) === 0.5) continue;
      expect(fixed6(x), String(x)).toBe(x.toFixed(6));
    }
  });

  it('refuses a number that is not finite', () => {
    expect(() => fixed6(Number.NaN)).toThrow('a logit-trace number must be finite (got NaN)');
    expect(() => fixed6(Number.POSITIVE_INFINITY)).toThrow('must be finite');
  });
});

describe('reading and writing logit traces', () => {
  it("reads a file in mlxcel's own layout (`# key` metadata, 8 entries)", () => {
    const text = [
      '# model\t/Users/me/models/gemma-4-12b-it-4bit',
      '# corpus\tcorpus.txt\ttokens\t2048',
      '# chunks\t64\tchunk_tokens\t4\ttopk\t8\tprefill\t1536',
      '# columns\tchunk\tpos\ttarget\tnll\ttop_ids\ttop_logits',
      '0\t0\t506\t4.668508\t506,1234,9,77,3,11,20,8\t31.250000,29.000000,28.500000,27.125000,27.000000,26.000000,25.500000,25.000000',
      '0\t1\t9\t0.105361\t9,506,3,4,5,6,7,8\t-1.000000,-1.500000,-2.000000,-2.000000,-3.000000,-4.000000,-5.000000,-6.000000',
      '',
    ].join('\n');
    const t = parseLogitTraceTsv(text, 'a.tsv');
    expect(metaValue(t, 'model')).toBe('/Users/me/models/gemma-4-12b-it-4bit');
    expect(t.meta.find((m) => m.key === 'chunks')?.values).toEqual([
      '64',
      'chunk_tokens',
      '4',
      'topk',
      '8',
      'prefill',
      '1536',
    ]);
    expect(t.rows).toEqual([
      {
        chunk: 0,
        pos: 0,
        target: 506,
        nll: 4.668508,
        ids: [506, 1234, 9, 77, 3, 11, 20, 8],
        logits: [31.25, 29, 28.5, 27.125, 27, 26, 25.5, 25],
      },
      {
        chunk: 0,
        pos: 1,
        target: 9,
        nll: 0.105361,
        ids: [9, 506, 3, 4, 5, 6, 7, 8],
        logits: [-1, -1.5, -2, -2, -3, -4, -5, -6],
      },
    ]);
    // CRLF line breaks read the same
    expect(parseLogitTraceTsv(text.replaceAll('\n', '\r\n'), 'a.tsv')).toEqual(t);
  });

  it('writes `#key<TAB>value` lines and rows with 6 decimals, and reads them back', () => {
    const f = new Float32Array([14.8125, 14.75, 2 ** -7, -0.3333333432674408]);
    const t: LogitTrace = {
      meta: [
        { key: 'model', values: ['target'] },
        { key: 'adapter', values: ['llvmpipe\t(LLVM 15)\nsecond line', 'platform', 'node'] },
      ],
      rows: [{ chunk: 3, pos: 2, target: 17, nll: 9.1234565, ids: [4, 5, 6, 7], logits: [...f] }],
    };
    const text = formatLogitTraceTsv(t);
    expect(text).toBe(
      '#model\ttarget\n#adapter\tllvmpipe (LLVM 15) second line\tplatform\tnode\n3\t2\t17\t9.123456\t4,5,6,7\t14.812500,14.750000,0.007812,-0.333333\n',
    );
    const back = parseLogitTraceTsv(text, 'w.tsv');
    expect(back.rows[0]).toEqual({
      chunk: 3,
      pos: 2,
      target: 17,
      nll: 9.123456,
      ids: [4, 5, 6, 7],
      logits: [14.8125, 14.75, 0.007812, -0.333333],
    });
    expect(() => formatLogitTraceTsv({ meta: [{ key: 'a b', values: [] }], rows: [] })).toThrow(
      'logit-trace metadata key "a b": use letters, digits, _ . - only',
    );
  });

  it('refuses each malformed line with the file, the line and the field', () => {
    const row = '0\t0\t5\t1.000000\t1,2\t2.000000,1.000000';
    const bad: [string, string][] = [
      ['0\t0\t5\t1.0\t1,2', 'x.tsv line 2: 5 tab-separated fields, expected 6'],
      ['0 0 5 1.0 1,2 2.0,1.0', 'x.tsv line 2: 1 tab-separated fields, expected 6'],
      ['-1\t0\t5\t1.0\t1,2\t2.0,1.0', 'x.tsv line 2: chunk "-1" is not a whole number >= 0'],
      ['0\t0.5\t5\t1.0\t1,2\t2.0,1.0', 'x.tsv line 2: pos "0.5" is not a whole number >= 0'],
      ['0\t0\tx\t1.0\t1,2\t2.0,1.0', 'x.tsv line 2: target "x" is not a whole number >= 0'],
      ['0\t0\t5\tnan\t1,2\t2.0,1.0', 'x.tsv line 2: nll "nan" is not a finite number'],
      ['0\t0\t5\t1.0\t1,2\tinf,1.0', 'x.tsv line 2: top_logits entry 1 "inf" is not a finite number'],
      ['0\t0\t5\t1.0\t1,,2\t2.0,1.0,0.5', 'x.tsv line 2: top_ids entry 2 "" is not a whole number >= 0'],
      ['0\t0\t5\t1.0\t1,2,3\t2.0,1.0', 'x.tsv line 2: 3 top_ids but 2 top_logits; they must pair up'],
      ['0\t0\t5\t1.0\t1,2\t1.0,2.0', 'x.tsv line 2: top_logits not in descending order (entry 2, 2.0, above entry 1)'],
    ];
    for (const [line, msg] of bad) expect(() => parseLogitTraceTsv(`${row}\n${line}\n`, 'x.tsv'), line).toThrow(msg);
    expect(() => parseLogitTraceTsv('#model\tm\n\n', 'empty.tsv')).toThrow(
      'empty.tsv: no trace rows (expected tab-separated lines of chunk, pos, target, nll, top_ids, top_logits)',
    );
    expect(() => parseLogitTraceTsv('{"schema": 1}', 'r.json')).toThrow('r.json line 1: 1 tab-separated fields');
  });
});
