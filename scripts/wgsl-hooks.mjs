// Node loader hooks so that `import src from '../../shaders/x.wgsl?raw'` works in Node (CLI, bench)
// exactly as it does under Vite: the module's default export is the file's text.
import { register } from 'node:module';

register(
  'data:text/javascript,' +
    encodeURIComponent(`
      import { readFile } from 'node:fs/promises';
      export async function load(url, context, next) {
        if (url.startsWith('file:') && url.endsWith('?raw')) {
          const text = await readFile(new URL(url.slice(0, -4)), 'utf8');
          return { format: 'module', shortCircuit: true, source: 'export default ' + JSON.stringify(text) + ';' };
        }
        return next(url, context);
      }`),
  import.meta.url,
);
