/**
 * What a checkpoint option (--target, --draft, --model) names, settled before a command runs: a folder as typed; or,
 * when no such path exists and the value reads ORG/NAME, that model's snapshot in the local Hugging Face cache
 * (hub-cache.ts). A folder that holds checkpoints only in its subfolders (public/demo, the output of `synth`) is
 * refused with the options to pass instead: the format layer's own words for it ("drop one checkpoint folder at a
 * time") are the page's.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { looksLikeHubId, resolveHubId } from './hub-cache.ts';

/** How a command uses a checkpoint option: the target it runs, the drafter beside it, or a folder it measures. */
export type CheckpointUse = 'target' | 'draft' | 'folder';

/** Report labels of folders resolved from a Hub id (the snapshot folder's own name is a commit hash). */
const hubLabels = new Map<string, string>();

/** The label of a checkpoint folder in messages and reports: its Hub id when it came from one, else its name. */
export function checkpointLabel(dir: string): string {
  return hubLabels.get(dir) ?? path.basename(dir);
}

const hasConfig = (dir: string) => existsSync(path.join(dir, 'config.json'));

function isFolder(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** The subfolders of `dir` that hold a config.json, sorted (target/ before assistant/ when both are there). */
function checkpointSubfolders(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => !n.startsWith('.') && isFolder(path.join(dir, n)));
  } catch {
    return [];
  }
  const order = (n: string) => (n === 'target' ? 0 : n === 'assistant' ? 1 : 2);
  return names.filter((n) => hasConfig(path.join(dir, n))).sort((a, b) => order(a) - order(b) || (a < b ? -1 : 1));
}

/**
 * The folder option `option` (value `value`) names for `use`. `draftOption` is the command's option for an assistant
 * (undefined when it takes none), so that a parent of target/ and assistant/ is answered with the options to type.
 */
export function resolveCheckpointOption(
  option: string,
  value: string,
  use: CheckpointUse,
  draftOption?: string,
  env: NodeJS.ProcessEnv = process.env,
): string {
  if (!existsSync(value)) {
    if (!looksLikeHubId(value)) return value; // the opener says "no such folder"
    const snapshot = resolveHubId(value, `--${option}`, env);
    hubLabels.set(snapshot, value);
    return snapshot;
  }
  if (use === 'folder' || !isFolder(value) || hasConfig(value)) return value;
  const subs = checkpointSubfolders(value);
  if (!subs.length) return value; // the opener says what the folder lacks
  const at = (s: string) => path.join(value, s);
  const count =
    subs.length === 1 ? 'a checkpoint' : subs.length === 2 ? 'two checkpoints' : `${subs.length} checkpoints`;
  const holds = `${value} holds ${count} (${subs.map((s) => `${s}/`).join(', ')})`;
  if (subs[0] === 'target' && subs[1] === 'assistant') {
    if (use === 'draft')
      throw new Error(`${holds}: pass --${option} ${at('assistant')} (with --target ${at('target')})`);
    const draft = draftOption ? ` --${draftOption} ${at('assistant')}` : '';
    throw new Error(`${holds}: pass --${option} ${at('target')}${draft}`);
  }
  throw new Error(`${holds}: pass --${option} ${at(subs[0])}${subs.length > 1 ? ' (or another of them)' : ''}`);
}
