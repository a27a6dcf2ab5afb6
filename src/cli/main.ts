/**
 * Ringside command line: the same engine as the page, headless, through Dawn.
 *   npm run cli -- <command> [options]
 */
import type { Command, CommandIO } from './command.ts';
import { info } from './commands/info.ts';
import { selftest } from './commands/selftest.ts';
import { synth } from './commands/synth.ts';
import { loadBench } from './commands/load-bench.ts';
import { policies } from './commands/policies.ts';
import { probe } from './commands/probe.ts';
import { routers } from './commands/routers.ts';
import { forward } from './commands/forward.ts';
import { generate } from './commands/generate.ts';
import { compare } from './commands/compare.ts';
import { trace } from './commands/trace.ts';
import { compareTraces } from './commands/compare-traces.ts';
import { bench } from './commands/bench.ts';
import { isGpuError } from '../gpu/errors.ts';
import { setVerbose } from './node-gpu.ts';
import { parseCommandOptions, UsageError, type OptionValues } from './parse-options.ts';
import { resolveCheckpointOption } from './checkpoint-dir.ts';

const COMMANDS: Command[] = [
  info,
  selftest,
  forward,
  generate,
  compare,
  policies,
  probe,
  routers,
  trace,
  compareTraces,
  synth,
  loadBench,
  bench,
];

function help(): string {
  const lines = [
    'Ringside: block-versus-chain parity lab for Gemma 4 MTP (WebGPU).',
    '',
    'usage: npm run cli -- <command> [options]',
    '',
    'commands:',
  ];
  for (const c of COMMANDS) lines.push(`  ${c.name.padEnd(14)} ${c.summary}`);
  lines.push('', 'npm run cli -- <command> --help  shows the options of one command.');
  lines.push(
    "--verbose (any command; or RINGSIDE_VERBOSE=1)  shows Dawn's own messages: its warnings, held back otherwise, and its loader's errors where no Vulkan driver gives an adapter.",
    'Checkpoint options (--target, --draft, --model) take a folder, or a Hub id ORG/NAME found in the local Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub); nothing is downloaded.',
  );
  return lines.join('\n');
}

function commandHelp(c: Command): string {
  const lines = [`usage: npm run cli -- ${c.usage}`, '', c.summary];
  const opts = Object.entries(c.options);
  if (opts.length) {
    lines.push('', 'options:');
    for (const [k, o] of opts)
      lines.push(`  --${k.padEnd(16)} ${o.help}${o.default !== undefined ? ` (default ${o.default})` : ''}`);
  }
  return lines.join('\n');
}

export async function main(argv: string[], io: CommandIO): Promise<number> {
  if (argv.includes('--verbose')) setVerbose(true);
  const [name, ...rest] = argv.filter((a) => a !== '--verbose');
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    io.out(help());
    return 0;
  }
  const cmd = COMMANDS.find((c) => c.name === name);
  if (!cmd) {
    io.err(
      `unknown command "${name}"; the commands are ${COMMANDS.map((c) => c.name).join(', ')}; see npm run cli -- --help`,
    );
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out(commandHelp(cmd));
    return 0;
  }
  let values: OptionValues;
  const positionals: string[] = [];
  try {
    values = parseCommandOptions(cmd, rest, positionals);
    resolveCheckpointOptions(cmd, values);
  } catch (e) {
    io.err(e instanceof UsageError ? (e as Error).message : `error: ${(e as Error).message}`);
    return e instanceof UsageError ? 2 : 1;
  }
  for (const [k, o] of Object.entries(cmd.options))
    if (values[k] === undefined && o.default !== undefined) values[k] = o.default;
  const args = { values, positionals };
  try {
    return await cmd.run(args, io);
  } catch (e) {
    const err = e as Error;
    io.err(`error: ${err.message}`);
    if (!isGpuError(e) && !(err.name === 'FormatError' || err.name === 'CancelledError') && process.env.RINGSIDE_DEBUG)
      io.err(String(err.stack));
    return 1;
  }
}

/** The checkpoint options of `cmd` (OptionSpec.checkpoint) replaced by the folders they name (checkpoint-dir.ts). */
function resolveCheckpointOptions(cmd: Command, values: OptionValues): void {
  const draftOption = Object.entries(cmd.options).find(([, o]) => o.checkpoint === 'draft')?.[0];
  for (const [k, o] of Object.entries(cmd.options)) {
    const v = values[k];
    if (o.checkpoint && typeof v === 'string' && v)
      values[k] = resolveCheckpointOption(k, v, o.checkpoint, draftOption);
  }
}

// `npm run cli -- ...` runs this in the package's folder; paths the user typed are relative to where they typed them
// (npm's INIT_CWD). Only under an npm script: a direct `node src/cli/main.ts` keeps its own working folder.
if (process.env.npm_lifecycle_event && process.env.INIT_CWD) process.chdir(process.env.INIT_CWD);

const io: CommandIO = { out: (t) => process.stdout.write(`${t}\n`), err: (t) => process.stderr.write(`${t}\n`) };
main(process.argv.slice(2), io).then(
  (code) => {
    // Dawn can keep the event loop alive; exit explicitly once output is flushed.
    process.stdout.write('', () => process.exit(code));
  },
  (e) => {
    io.err(`error: ${(e as Error).message}`);
    process.exit(1);
  },
);
