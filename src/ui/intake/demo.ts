/**
 * The demo checkpoint shipped in public/demo, fetched as Blobs and handed to the engine exactly like a dropped
 * folder, so the demo exercises the real path. public/demo/manifest.json lists the files of each folder (the
 * target's may include tokenizer.json, which enables text prompts), says what the model is (`about`, shown once
 * it is loaded) and may suggest a text prompt for the generation tab.
 */
import type { Role } from '../../worker/engine.ts';
import type { PickedFolder } from './folder-walk.ts';

export interface DemoManifest {
  name: string;
  description?: string;
  /** One or two sentences on what the demo model is (and is not), shown after it loads. */
  about?: string;
  target: string[];
  assistant: string[];
  /** A text prompt for the generation tab; needs tokenizer.json among the target's files. */
  prompt?: { text: string; chat: boolean };
}

const SAFE_NAME = /^[\w.-]+$/;

/** Validates public/demo/manifest.json; throws with a message naming what is wrong. */
export function parseDemoManifest(json: unknown): DemoManifest {
  const bad = (why: string): never => {
    throw new Error(`demo manifest: ${why}`);
  };
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return bad('not a JSON object');
  const m = json as Record<string, unknown>;
  const text = (k: string) => {
    const v = m[k];
    if (v !== undefined && typeof v !== 'string') bad(`"${k}" must be a string`);
    return v as string | undefined;
  };
  const files = (role: Role) => {
    const v = m[role];
    if (!Array.isArray(v) || !v.every((n) => typeof n === 'string' && SAFE_NAME.test(n)))
      return bad(`"${role}" must list plain file names`);
    const names = v as string[];
    if (!names.includes('config.json')) bad(`"${role}" lacks config.json`);
    return names;
  };
  const name = text('name');
  if (!name) bad('"name" is missing');
  const target = files('target');
  const assistant = files('assistant');
  let prompt: DemoManifest['prompt'];
  if (m.prompt !== undefined) {
    const p = m.prompt as Record<string, unknown>;
    if (typeof p !== 'object' || p === null || typeof p.text !== 'string' || !p.text.trim())
      bad('"prompt" must be {"text": "...", "chat": false}');
    if (p.chat !== undefined && typeof p.chat !== 'boolean') bad('"prompt.chat" must be true or false');
    if (!target.includes('tokenizer.json')) bad('"prompt" needs tokenizer.json among the target files');
    prompt = { text: p.text as string, chat: p.chat === true };
  }
  return { name: name!, description: text('description'), about: text('about'), target, assistant, prompt };
}

const base = () => new URL('demo/', new URL(import.meta.env.BASE_URL, location.href));

async function fetchOk(url: URL): Promise<Response> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`demo model: ${url.pathname} answered ${res.status} ${res.statusText}`);
  return res;
}

export async function fetchDemo(): Promise<Record<Role, PickedFolder> & { manifest: DemoManifest }> {
  const m = parseDemoManifest(await (await fetchOk(new URL('manifest.json', base()))).json());
  const folder = async (role: Role): Promise<PickedFolder> => {
    const files = await Promise.all(
      m[role].map(async (path) => {
        const blob = await (await fetchOk(new URL(`${role}/${path}`, base()))).blob();
        return { path, file: new File([blob], path) };
      }),
    );
    // named as a checkpoint folder is ("gemma-4-12b-it", "gemma-4-12b-it-assistant"): the zone already says the role
    return { label: role === 'target' ? m.name : `${m.name}-assistant`, files };
  };
  return { manifest: m, target: await folder('target'), assistant: await folder('assistant') };
}
