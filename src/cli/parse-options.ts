/**
 * Reads a command's --options from the words typed after its name, with errors in the CLI's own words: one line that
 * names the option and the command and points to its --help. Node's parseArgs in strict mode throws texts such as
 * "Unknown option '--foo'. To specify a positional argument starting with a '-', place it at the end of the command
 * after '--', as in '-- "--foo"" (with an unbalanced quote), so it runs in its lenient mode, which returns every word
 * as a token, and the tokens are checked here.
 */
import { parseArgs } from 'node:util';
import type { Command } from './command.ts';

/** A mistake in the words typed (exit code 2): its message is the whole answer, one line. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export type OptionValues = Record<string, string | boolean | undefined>;

const seeHelp = (c: Command) => `see npm run cli -- ${c.name} --help`;

/** The option names of `c` closest to a mistyped one (edit distance at most 2), for "did you mean". */
function nearest(c: Command, typed: string): string | undefined {
  let best: string | undefined;
  let bestD = 3;
  for (const name of Object.keys(c.options)) {
    const d = editDistance(typed, name);
    if (d < bestD) [best, bestD] = [name, d];
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length];
}

/**
 * The values of `cmd`'s options in `argv` (defaults not applied). Refuses, with a UsageError: an option the command
 * does not have, a string option without its value (at the end, or followed by another --option), a value given to a
 * switch, and any word beyond the command's own `positionals` (a stray word, or everything after a second "--", would
 * otherwise be dropped without a sound and the run go on without the options it carried). The command's words are
 * appended to `positionals`.
 */
export function parseCommandOptions(cmd: Command, argv: string[], positionals: string[] = []): OptionValues {
  const { tokens } = parseArgs({
    args: argv,
    options: Object.fromEntries(Object.entries(cmd.options).map(([k, o]) => [k, { type: o.type }])),
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const values: OptionValues = {};
  const stray: string[] = [];
  for (const t of tokens) {
    if (t.kind === 'positional') stray.push(t.value);
    if (t.kind !== 'option') continue;
    const spec = Object.hasOwn(cmd.options, t.name) ? cmd.options[t.name] : undefined;
    if (!spec) {
      const near = nearest(cmd, t.name);
      throw new UsageError(
        `unknown option ${t.rawName} for ${cmd.name}${near ? ` (did you mean --${near}?)` : ''}; ${seeHelp(cmd)}`,
      );
    }
    if (spec.type === 'boolean') {
      if (t.inlineValue) throw new UsageError(`${t.rawName} is a switch and takes no value; ${seeHelp(cmd)}`);
      values[t.name] = true;
    } else {
      // Lenient parsing takes the next word as the value even when it is the next --option.
      if (t.value === undefined || (!t.inlineValue && t.value.startsWith('--')))
        throw new UsageError(
          `${t.rawName} needs a value (${spec.help}); write ${t.rawName}=VALUE for one that starts with "--"; ${seeHelp(cmd)}`,
        );
      values[t.name] = t.value;
    }
  }
  const words = cmd.positionals ?? [];
  if (stray.length > words.length) {
    const extra = stray.slice(words.length);
    throw new UsageError(
      `unexpected argument${extra.length > 1 ? 's' : ''} ${extra.map((p) => `"${p}"`).join(' ')}: ${cmd.name} takes ${words.length ? `${words.join(' ')} and --options` : 'only --options'} (with npm run, one "--" before all of them); ${seeHelp(cmd)}`,
    );
  }
  if (stray.length < words.length)
    throw new UsageError(
      `${cmd.name} needs ${words.join(' ')} (missing ${words.slice(stray.length).join(' ')}); ${seeHelp(cmd)}`,
    );
  positionals.push(...stray);
  return values;
}
