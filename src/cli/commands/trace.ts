import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { loadModels } from '../load-models.ts';
import { runTrace } from '../../parity/trace.ts';
import { checkpointInfo, qwenCheckpointInfo } from '../../parity/summary.ts';
import { reportArmTsv, type TraceCorpus } from '../../parity/trace-files.ts';
import { DECIDED_GAP } from '../../parity/trace-thresholds.ts';
import type { TextCodec } from '../../format/tokenizer.ts';
import { isQwenDir, loadQwenTarget } from '../qwen-target.ts';
import { choice, intOption, jsonFileOption, outputFileOption, requireString } from '../args.ts';
import { checkPositions, MAX_POSITIONS } from '../bounds.ts';
import { defaultReportPath, ensureReportFolder } from '../report-path.ts';
import type { Command } from '../command.ts';
import { checkPolicyName } from '../../model/policy-registry.ts';
import { judgementLines } from '../judgement-text.ts';
import { MAX_VERIFY_BLOCK } from '../../model/target.ts';
import { EXACTNESS_FAILED_EXIT, exactnessBeforeVerdict, exitAfterSelfTest } from '../exactness.ts';

/** The folder `--tsv` names, made if missing; refused when it is a file. Checked before any model is read. */
async function tsvFolder(dir: string): Promise<string> {
  const s = await stat(dir).catch(() => undefined);
  if (s && !s.isDirectory())
    throw new Error(`--tsv ${dir}: is a file; give the folder to write chain.tsv and block.tsv in`);
  if (!s)
    await mkdir(dir, { recursive: true }).catch((e) => {
      throw new Error(`--tsv ${dir}: cannot make the folder (${(e as Error).message})`);
    });
  return dir;
}

/**
 * The stream of a text, as mlxcel's logit trace takes it: the tokenizer's BOS (when it has one), then the text's
 * tokens without special tokens. `prefix` counts the text's tokens after the BOS, so `--prefix 1536` is mlxcel's
 * documented BOS + 1,536 untraced tokens; the trace's own prefix is the BOS and those.
 */
function textStream(
  text: string,
  file: string,
  tok: TextCodec,
  o: { prefix: number; traced: number },
): { stream: number[]; prefix: number; corpus: TraceCorpus } {
  const ids = tok.encode(text, false);
  const need = o.prefix + o.traced + 1;
  if (ids.length < need)
    throw new Error(
      `--text ${file}: encodes to ${ids.length} tokens; the trace needs prefix ${o.prefix} + traced ${o.traced} + 1 = ${need} (give a longer text or smaller --prefix / --traced)`,
    );
  const bos = tok.bos;
  const stream = bos === null ? ids : [bos, ...ids];
  return {
    stream,
    prefix: o.prefix + (bos === null ? 0 : 1),
    corpus: { name: path.basename(file), tokens: stream.length, bos },
  };
}

export const trace: Command = {
  name: 'trace',
  summary: `Teacher-forced trace: chain vs block logits over traced positions after an untraced prefix (JSON report, mlxcel logit-trace TSVs). Exit 0 equal, 3 diverges, ${EXACTNESS_FAILED_EXIT} when the exactness self-test run first failed on this adapter.`,
  usage:
    'trace --target DIR|ORG/NAME [--prefix 1536] [--traced 256] [--block K] [--policy NAME] [--precision f32|bf16] [--stream FILE.json | --text FILE] [--report FILE] [--tsv DIR]',
  options: {
    target: {
      type: 'string',
      help: 'target checkpoint folder, or a Hub id in the local Hugging Face cache',
      checkpoint: 'target',
    },
    prefix: {
      type: 'string',
      help: "untraced context tokens (with --text: the text's tokens after the BOS, as mlxcel counts them)",
      default: '1536',
    },
    traced: { type: 'string', help: 'traced positions', default: '256' },
    block: { type: 'string', help: 'block width K', default: '4' },
    policy: { type: 'string', help: 'numerics policy', default: 'exact' },
    precision: { type: 'string', help: 'f32 | bf16', default: 'f32' },
    stream: { type: 'string', help: 'JSON array of token ids (default: a deterministic pseudo-random stream)' },
    text: {
      type: 'string',
      help: "a text file to trace, tokenized with the target's tokenizer.json, BOS first (mlxcel's logit_trace stream)",
    },
    report: { type: 'string', help: 'where to write the JSON report (default reports/trace-YYYYMMDD-HHMMSS.json)' },
    tsv: {
      type: 'string',
      help: "folder to write chain.tsv and block.tsv in, mlxcel's logit-trace format (compare-traces reads them)",
    },
  },
  async run({ values }, io) {
    const out = outputFileOption(values, 'report') ?? defaultReportPath('trace');
    const dir = requireString(values, 'target');
    if (values.stream !== undefined && values.text !== undefined)
      throw new Error('give --stream or --text, not both: each is the whole token stream');
    // read before the weights are uploaded: a file that is missing or not JSON is refused without that wait
    const stream = (await jsonFileOption(values, 'stream')) as number[] | undefined;
    const textFile = values.text === undefined ? undefined : String(values.text);
    const text =
      textFile === undefined
        ? undefined
        : await readFile(textFile, 'utf8').catch((e) => {
            throw new Error(`--text ${textFile}: cannot read the file (${(e as Error).message})`);
          });
    // every option is checked before the models are read
    const opts = {
      prefix: intOption(values, 'prefix', 1, MAX_POSITIONS)!,
      traced: intOption(values, 'traced', 1, MAX_POSITIONS)!,
      block: intOption(values, 'block', 1, MAX_VERIFY_BLOCK)!,
      policy: String(values.policy),
      precision: choice(values, 'precision', ['f32', 'bf16'] as const)!,
      stream,
    };
    checkPolicyName((await isQwenDir(dir)) ? 'qwen3_5' : 'gemma4', opts.policy);
    const tsvDir = values.tsv === undefined ? undefined : await tsvFolder(String(values.tsv));
    // the positions fed (the prefix, then the traced tokens) against the model's limit, before any upload
    let limit: { label: string; maxPositions: number | null } = { label: dir, maxPositions: null };
    const positions = (label: string, maxPositions: number | null) => {
      limit = { label, maxPositions };
      checkPositions(
        opts.prefix + opts.traced,
        `--prefix ${opts.prefix} + --traced ${opts.traced}`,
        maxPositions,
        label,
      );
    };
    if (opts.prefix + opts.traced > MAX_POSITIONS)
      throw new Error(
        `--prefix ${opts.prefix} + --traced ${opts.traced} = ${opts.prefix + opts.traced} positions, more than the ${MAX_POSITIONS} any command takes`,
      );
    // A Qwen3.5 folder opens with its family's loader (the trace needs the target only).
    const q = (await isQwenDir(dir))
      ? await loadQwenTarget(dir, undefined, (ck) => positions(ck.label, ck.description.config.maxPositions))
      : undefined;
    const m = q
      ? {
          ctx: q.ctx,
          targetWeights: q.weights,
          info: qwenCheckpointInfo(q.checkpoint),
          tokenizer: q.tokenizer,
          close: () => q.close(),
        }
      : await loadModels(dir, undefined, (o) =>
          positions(o.target.label, o.target.description.config.maxPositions),
        ).then((g) => ({
          ctx: g.ctx,
          targetWeights: g.targetWeights,
          info: checkpointInfo(g.target),
          tokenizer: g.tokenizer,
          close: () => g.close(),
        }));
    try {
      const vocab = m.targetWeights.desc.vocab;
      if (stream && (!Array.isArray(stream) || stream.some((t) => !Number.isInteger(t) || t < 0 || t >= vocab))) {
        throw new Error(
          `--stream ${values.stream}: must be a JSON array of token ids below the vocabulary size ${vocab}`,
        );
      }
      let corpus: TraceCorpus = stream
        ? { name: path.basename(String(values.stream)), tokens: stream.length }
        : { name: 'pseudo-random', tokens: opts.prefix + opts.traced + 1 };
      if (text !== undefined) {
        if (!m.tokenizer)
          throw new Error(
            `--text needs a tokenizer.json in the target folder ${dir} (or give the tokens with --stream)`,
          );
        const t = textStream(text, textFile!, m.tokenizer, opts);
        const bad = t.stream.find((id) => id >= vocab);
        if (bad !== undefined)
          throw new Error(
            `--text ${textFile}: the tokenizer gives id ${bad}, outside the model's vocabulary (${vocab})`,
          );
        opts.stream = t.stream;
        opts.prefix = t.prefix;
        corpus = t.corpus;
        // the text's own length, now known, against the model's limit (its nominal one was checked before upload)
        checkPositions(
          opts.prefix + opts.traced,
          `--text ${textFile}: --prefix ${opts.prefix} + --traced ${opts.traced}`,
          limit.maxPositions,
          limit.label,
        );
      }
      const exactnessSelfTest = await exactnessBeforeVerdict(m.ctx, io);
      const report = await runTrace(
        {
          ctx: m.ctx,
          weights: m.targetWeights,
          target: m.info,
          platform: m.ctx.report.platform,
          onProgress: (p) => io.err(`[trace] ${p.phase} ${p.done}/${p.total}`),
          exactnessSelfTest,
        },
        opts,
      );
      ensureReportFolder(out);
      await writeFile(out, JSON.stringify(report, null, 1));
      if (tsvDir)
        for (const arm of ['chain', 'block'] as const)
          await writeFile(path.join(tsvDir, `${arm}.tsv`), reportArmTsv(report, arm, corpus));
      const x = report.metrics;
      io.out(report.summary);
      io.out(
        `top-1 disagreements ${x.top1Disagreements}/${x.positions}; decided (gap >= 2) ${x.decidedDisagreements}/${x.decidedPositions}; |delta logit| p50 ${x.deltaLogit.p50.toExponential(2)} p90 ${x.deltaLogit.p90.toExponential(2)} p99 ${x.deltaLogit.p99.toExponential(2)} max ${x.deltaLogit.max.toExponential(2)}; perplexity chain ${x.perplexity.chain.toPrecision(6)} block ${x.perplexity.block.toPrecision(6)}`,
      );
      if (report.judgement) {
        io.out('');
        io.out('judgement of the block arm (candidate) against the chain (reference):');
        for (const line of judgementLines(report.judgement, DECIDED_GAP)) io.out(line);
        io.out('');
      }
      if (exactnessSelfTest.warning) io.out(`warning: ${exactnessSelfTest.warning}`);
      io.out(`report written to ${out}`);
      if (tsvDir)
        io.out(`logit traces written to ${path.join(tsvDir, 'chain.tsv')} and ${path.join(tsvDir, 'block.tsv')}`);
      // as probe: 0 when every block row equals the chain, 3 when one differs, 4 when the self-test failed
      return exitAfterSelfTest(exactnessSelfTest, report.verdict === 'equal' ? 0 : 3);
    } finally {
      m.close();
    }
  },
};
