/**
 * The demo checkpoint shipped in public/demo (the project's tiny test model and its assistant), fetched
 * as Blobs and handed to the engine exactly like a dropped folder, so the demo exercises the real path.
 */
import type { Role } from '../../worker/engine.ts';
import type { PickedFolder } from './folder-walk.ts';

interface Manifest {
  name: string;
  target: string[];
  assistant: string[];
}

const base = () => new URL('demo/', new URL(import.meta.env.BASE_URL, location.href));

async function fetchOk(url: URL): Promise<Response> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`demo model: ${url.pathname} answered ${res.status} ${res.statusText}`);
  return res;
}

export async function fetchDemo(): Promise<Record<Role, PickedFolder>> {
  const m = (await (await fetchOk(new URL('manifest.json', base()))).json()) as Manifest;
  const folder = async (role: Role): Promise<PickedFolder> => {
    const names = Array.isArray(m[role]) ? m[role].filter((n) => typeof n === 'string' && /^[\w.-]+$/.test(n)) : [];
    const files = await Promise.all(
      names.map(async (path) => {
        const blob = await (await fetchOk(new URL(`${role}/${path}`, base()))).blob();
        return { path, file: new File([blob], path) };
      }),
    );
    return { label: `demo ${m.name} ${role}`, files };
  };
  return { target: await folder('target'), assistant: await folder('assistant') };
}
