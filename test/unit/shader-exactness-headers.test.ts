/**
 * Every shader says in its header whether Metal's relaxed math can break a verify row's equality with its chain
 * step there (docs/NUMERICS.md, "Which kernels hold it, and how"): one line `// Relaxed-math exactness: S.` with S
 * one of four statuses, and the doc's table lists each shader under the status its header gives. A new kernel
 * without that line, or a header and a table that disagree, fails here.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');
const STATUSES = ['one stream', 'pinned', 'not on the exact path', 'no arithmetic'] as const;
type Status = (typeof STATUSES)[number];

function headerStatus(file: string): Status {
  const lines = readFileSync(path.join(ROOT, 'shaders', file), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('// Relaxed-math exactness: '));
  expect(lines, `${file}: one "// Relaxed-math exactness:" line`).toHaveLength(1);
  const status = STATUSES.find((s) => lines[0].startsWith(`// Relaxed-math exactness: ${s}`));
  expect(status, `${file}: "${lines[0]}" names one of ${STATUSES.join(', ')}`).toBeDefined();
  return status!;
}

/** The doc table's rows: status (the text before its colon) -> the shaders listed. */
function docTable(): Map<Status, string[]> {
  const doc = readFileSync(path.join(ROOT, 'docs/NUMERICS.md'), 'utf8');
  const section = doc.split('### Which kernels hold it, and how')[1].split('\n### ')[0];
  const table = new Map<Status, string[]>();
  for (const row of section.split('\n').filter((l) => /^\| [a-z]/.test(l) && !l.startsWith('| holds'))) {
    const [, holds, kernels] = row.split('|').map((c) => c.trim());
    const status = STATUSES.find((s) => holds.split(':')[0] === s);
    expect(status, `table row "${holds}"`).toBeDefined();
    table.set(
      status!,
      [...kernels.matchAll(/`([a-z0-9_]+\.wgsl)`/g)].map((m) => m[1]),
    );
  }
  return table;
}

describe('relaxed-math exactness in every shader header', () => {
  const shaders = readdirSync(path.join(ROOT, 'shaders'))
    .filter((f) => f.endsWith('.wgsl'))
    .sort();

  it('every shader states one status, and docs/NUMERICS.md lists each under the same one', () => {
    const byHeader = new Map<Status, string[]>(STATUSES.map((s) => [s, []]));
    for (const f of shaders) byHeader.get(headerStatus(f))!.push(f);
    const table = docTable();
    for (const s of STATUSES) expect([...(table.get(s) ?? [])].sort(), s).toEqual(byHeader.get(s));
  });

  it('a pinned kernel defines the pin it says it uses', () => {
    for (const f of shaders.filter((f) => headerStatus(f) === 'pinned'))
      expect(readFileSync(path.join(ROOT, 'shaders', f), 'utf8'), f).toMatch(/\nfn pin\(v: f32\) -> f32/);
  });
});
