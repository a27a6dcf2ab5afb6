/**
 * mlxcel's logit-trace format (`examples/logit_trace` writes it, `scripts/compare_logit_traces.py` reads it), read and
 * written byte for byte: tab-separated text; lines starting with `#` are metadata (`#key<TAB>value[<TAB>...]`; mlxcel
 * itself writes `# key`, which reads the same); every other line is one traced position:
 *
 *   chunk <TAB> pos <TAB> target <TAB> nll <TAB> top_ids <TAB> top_logits
 *
 * `pos` is the row's index inside its chunk (the forward that produced it), `target` the stream's token the row
 * predicts, `nll` = -log_softmax(row)[target] (positive), and the last two fields as many comma-separated entries,
 * ids by logit descending, numbers printed with 6 decimals. Pure text in and out: the CLI and the page share it.
 */

/** One traced position. */
export interface LogitTraceRow {
  chunk: number;
  pos: number;
  target: number;
  nll: number;
  ids: number[];
  logits: number[];
}

/** A metadata line: its key and the tab-separated values after it. */
export interface LogitTraceMeta {
  key: string;
  values: string[];
}

export interface LogitTrace {
  meta: LogitTraceMeta[];
  rows: LogitTraceRow[];
}

/** The columns line mlxcel writes (and this writer too): the row layout, named. */
export const LOGIT_TRACE_COLUMNS = ['chunk', 'pos', 'target', 'nll', 'top_ids', 'top_logits'] as const;

const UINT = /^\d+$/;
/** What `{:.6}` and `float.__repr__` print for a finite number (also accepts an exponent, as Python's float() does). */
const DECIMAL = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

/**
 * `x` with exactly 6 decimals, as Rust's `format!("{:.6}", x)` prints it (mlxcel's writer): the exact binary value
 * rounded half to even, the sign kept on a negative value that rounds to zero. JavaScript's toFixed rounds exact
 * ties away from zero (0.0078125 = 2^-7, an f32 logit, gives 0.007813 there, 0.007812 here).
 */
export function fixed6(x: number): string {
  if (!Number.isFinite(x)) throw new Error(`a logit-trace number must be finite (got ${x})`);
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const negative = hi >>> 31 === 1;
  const biased = (hi >>> 20) & 0x7ff;
  // |x| = mant * 2^exp exactly
  let mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let exp = -1074;
  if (biased !== 0) {
    mant |= 1n << 52n;
    exp = biased - 1075;
  }
  const scaled = mant * 1_000_000n;
  let q: bigint;
  if (exp >= 0) q = scaled << BigInt(exp);
  else {
    const d = 1n << BigInt(-exp);
    q = scaled / d;
    const twice = (scaled % d) * 2n;
    if (twice > d || (twice === d && (q & 1n) === 1n)) q += 1n;
  }
  const digits = q.toString().padStart(7, '0');
  return `${negative ? '-' : ''}${digits.slice(0, -6)}.${digits.slice(-6)}`;
}

/** Metadata values may not hold the separators: tabs and line breaks become spaces. */
const clean = (s: string) => s.replace(/[\t\r\n]+/g, ' ');

/** The trace as text: its metadata lines, then one line per row. */
export function formatLogitTraceTsv(t: LogitTrace): string {
  const out: string[] = [];
  for (const m of t.meta) {
    if (!/^[A-Za-z0-9_.-]+$/.test(m.key))
      throw new Error(`logit-trace metadata key "${m.key}": use letters, digits, _ . - only`);
    out.push(`#${[m.key, ...m.values.map(clean)].join('\t')}`);
  }
  for (const r of t.rows)
    out.push(
      `${r.chunk}\t${r.pos}\t${r.target}\t${fixed6(r.nll)}\t${r.ids.join(',')}\t${r.logits.map(fixed6).join(',')}`,
    );
  return `${out.join('\n')}\n`;
}

/**
 * Reads a logit trace. Strict: every row has the six fields, whole numbers where the format has them, finite
 * numbers, as many ids as logits, logits in descending order; otherwise an error naming `name`, the line and the
 * field. Blank lines are skipped; a line break may be CRLF.
 */
export function parseLogitTraceTsv(text: string, name: string): LogitTrace {
  const meta: LogitTraceMeta[] = [];
  const rows: LogitTraceRow[] = [];
  const lines = text.split('\n');
  lines.forEach((raw, i) => {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const at = `${name} line ${i + 1}`;
    if (!line.trim()) return;
    if (line.startsWith('#')) {
      const [key, ...values] = line.slice(1).trim().split('\t');
      meta.push({ key: key.trim(), values });
      return;
    }
    const f = line.split('\t');
    if (f.length !== 6)
      throw new Error(
        `${at}: ${f.length} tab-separated fields, expected 6 (${LOGIT_TRACE_COLUMNS.join(', ')}); is this a logit trace?`,
      );
    const uint = (v: string, field: string) => {
      if (!UINT.test(v)) throw new Error(`${at}: ${field} "${v}" is not a whole number >= 0`);
      return Number(v);
    };
    const finite = (v: string, field: string) => {
      if (!DECIMAL.test(v)) throw new Error(`${at}: ${field} "${v}" is not a finite number`);
      return Number(v);
    };
    const ids = f[4].split(',').map((v, j) => uint(v, `top_ids entry ${j + 1}`));
    const logits = f[5].split(',').map((v, j) => finite(v, `top_logits entry ${j + 1}`));
    if (ids.length !== logits.length)
      throw new Error(`${at}: ${ids.length} top_ids but ${logits.length} top_logits; they must pair up`);
    for (let j = 1; j < logits.length; j++)
      if (logits[j] > logits[j - 1])
        throw new Error(
          `${at}: top_logits not in descending order (entry ${j + 1}, ${f[5].split(',')[j]}, above entry ${j})`,
        );
    rows.push({
      chunk: uint(f[0], 'chunk'),
      pos: uint(f[1], 'pos'),
      target: uint(f[2], 'target'),
      nll: finite(f[3], 'nll'),
      ids,
      logits,
    });
  });
  if (!rows.length)
    throw new Error(`${name}: no trace rows (expected tab-separated lines of ${LOGIT_TRACE_COLUMNS.join(', ')})`);
  return { meta, rows };
}

/** The first value of metadata `key`, if the trace has it. */
export function metaValue(t: LogitTrace, key: string): string | undefined {
  return t.meta.find((m) => m.key === key)?.values[0];
}
