// Bundles the CLI (src/cli/main.ts and everything it imports, the app's dependencies included) into one ES module
// for a machine without the TypeScript loader: scripts/gpu/pack.sh calls it, so the pack carries Node, this bundle
// and Dawn only. Usage: node scripts/gpu/bundle.mjs OUT.mjs (from the project root, after npm ci).
//
// The bundle lies two folders below the project root (.gpu/bundle/cli.mjs), as src/cli/main.ts does, so that paths
// taken from import.meta.url (software-adapter.ts REPO_ROOT) still name the project root.
// WGSL imports (`x.wgsl?raw`) are inlined, and read again at run time from RINGSIDE_SHADERS=DIR when that folder
// holds a file of the same name: the A/B override scripts/wgsl-hooks.mjs gives the unbundled CLI.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { build } from 'esbuild';

const out = process.argv[2];
if (!out) {
  console.error('usage: node scripts/gpu/bundle.mjs OUT.mjs');
  process.exit(2);
}

const rawWgsl = {
  name: 'raw-wgsl',
  setup(b) {
    b.onResolve({ filter: /\?raw$/ }, (a) => ({
      path: path.resolve(a.resolveDir, a.path.slice(0, -'?raw'.length)),
      namespace: 'raw-wgsl',
    }));
    b.onLoad({ filter: /.*/, namespace: 'raw-wgsl' }, async (a) => {
      const text = await readFile(a.path, 'utf8');
      const name = path.basename(a.path);
      return {
        loader: 'js',
        contents: `import { existsSync, readFileSync } from 'node:fs';
const dir = process.env.RINGSIDE_SHADERS;
const alt = dir ? dir + '/' + ${JSON.stringify(name)} : '';
export default alt && existsSync(alt) ? readFileSync(alt, 'utf8') : ${JSON.stringify(text)};`,
      };
    });
  },
};

await build({
  entryPoints: ['src/cli/main.ts'],
  outfile: out,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // Dawn's native addon stays a package beside the bundle; node: built-ins are Node's
  external: ['webgpu'],
  plugins: [rawWgsl],
  // CommonJS dependencies bundled into an ES module call require() for Node's built-ins
  banner: {
    js: "import { createRequire as __ringsideRequire } from 'node:module'; const require = __ringsideRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
