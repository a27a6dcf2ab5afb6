// Node loader hooks so that `import src from '../../shaders/x.wgsl?raw'` works in Node (CLI, bench)
// exactly as it does under Vite: the module's default export is the file's text.
//
// RINGSIDE_SHADERS=DIR (a development aid for A/B measurements on a device, e.g. a kernel variant timed by
// `npm run bench` without editing shaders/): a shader file of the same name in DIR is loaded instead.
// The CLI and the bench print nothing about it, so it is never set by the tests or the CI.
import { register } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const override = process.env.RINGSIDE_SHADERS ? pathToFileURL(`${resolve(process.env.RINGSIDE_SHADERS)}/`).href : '';

register(
  'data:text/javascript,' +
    encodeURIComponent(`
      import { readFile, access } from 'node:fs/promises';
      const override = ${JSON.stringify(override)};
      export async function load(url, context, next) {
        if (url.startsWith('file:') && url.endsWith('?raw')) {
          let file = new URL(url.slice(0, -4));
          if (override && file.pathname.includes('/shaders/')) {
            const alt = new URL(file.pathname.replace(/^.*\\/shaders\\//, ''), override);
            try { await access(alt); file = alt; } catch {}
          }
          const text = await readFile(file, 'utf8');
          return { format: 'module', shortCircuit: true, source: 'export default ' + JSON.stringify(text) + ';' };
        }
        return next(url, context);
      }`),
  import.meta.url,
);
