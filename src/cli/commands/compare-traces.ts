import { readFile, writeFile } from 'node:fs/promises';
import { judgeTraces } from '../../parity/trace-judgement.ts';
import { readTraceText, type TraceArm } from '../../parity/trace-files.ts';
import { DECIDED_GAP } from '../../parity/trace-thresholds.ts';
import { choice, outputFileOption } from '../args.ts';
import type { Command } from '../command.ts';
import { judgementLines } from '../judgement-text.ts';

/** A decimal number >= 0 and nothing else ("2", "2.5", "0.75"); Number() alone takes "", " 2 " and "0x2". */
const DECIMAL = /^\d+(\.\d+)?$/;

async function readTrace(file: string, arm: TraceArm) {
  const text = await readFile(file, 'utf8').catch((e) => {
    throw new Error(`${file}: cannot read the file (${(e as Error).message})`);
  });
  return readTraceText(text, file, arm);
}

export const compareTraces: Command = {
  name: 'compare-traces',
  summary:
    'Judge two teacher-forced traces of the same stream (mlxcel logit-trace TSVs or Ringside trace reports): top-1 disagreement overall and on decided positions, by gap bucket, ranks, |delta logit|, perplexity, verdict.',
  usage: 'compare-traces REF CAND [--decided 2] [--json FILE] [--ref-arm chain|block] [--cand-arm chain|block]',
  positionals: ['REF', 'CAND'],
  options: {
    decided: {
      type: 'string',
      help: "the reference's top-1 - top-2 logit gap from which a position counts as decided",
      default: String(DECIDED_GAP),
    },
    json: { type: 'string', help: 'where to write the judgement as JSON' },
    'ref-arm': { type: 'string', help: 'which arm of a trace report REF is: chain (default) or block' },
    'cand-arm': { type: 'string', help: 'which arm of a trace report CAND is: block (default) or chain' },
  },
  async run({ values, positionals }, io) {
    const [refFile, candFile] = positionals;
    const raw = String(values.decided);
    if (!DECIMAL.test(raw)) throw new Error(`--decided must be a number >= 0, like 2 or 1.5 (got "${raw}")`);
    const decidedGap = Number(raw);
    const json = outputFileOption(values, 'json');
    // one report given twice is its own chain against its own block
    const refArm = choice(values, 'ref-arm', ['chain', 'block'] as const) ?? 'chain';
    const candArm = choice(values, 'cand-arm', ['chain', 'block'] as const) ?? 'block';
    const ref = await readTrace(refFile, refArm);
    const cand = await readTrace(candFile, candArm);
    for (const [t, opt] of [
      [ref, 'ref-arm'],
      [cand, 'cand-arm'],
    ] as const)
      if (t.kind === 'tsv' && values[opt] !== undefined)
        throw new Error(`--${opt}: ${t.name} is a logit-trace TSV, which holds one arm; the option picks a report's`);
    const j = judgeTraces(ref.rows, cand.rows, { decidedGap, names: { reference: ref.name, candidate: cand.name } });
    io.out(`reference  ${ref.name}: ${ref.about}`);
    io.out(`candidate  ${cand.name}: ${cand.about}`);
    io.out(`positions  ${j.positions}`);
    io.out('');
    for (const line of judgementLines(j, decidedGap)) io.out(line);
    if (json) {
      await writeFile(json, `${JSON.stringify(j, null, 1)}\n`);
      io.out(`judgement written to ${json}`);
    }
    // as trace and probe: 0 when the two agree everywhere, 3 when they differ
    return j.verdict === 'identical' ? 0 : 3;
  },
};
