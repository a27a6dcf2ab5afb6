#!/usr/bin/env node
// The layering of src/ as declared in docs/ARCHITECTURE.md, enforced: each top-level folder may import only the
// folders listed for it (and itself). Imports are read with TypeScript's own pre-processor (static imports,
// re-exports, dynamic import() and `?raw`/`?worker` suffixes), type-only imports included: a type that climbs
// the layers is an arrow against them too. Prints each offending import and exits 1; prints a one-line summary
// and exits 0 when the tree holds.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const src = path.join(root, 'src');

/**
 * Lower layers first. Browser code (worker, ui) never reaches node/ or cli/; only gpu/ reads shaders/, and only
 * parity/ reads package.json (the version a report names).
 */
export const ALLOWED = {
  util: [],
  format: ['util'],
  numerics: ['util', 'format'],
  gpu: ['util', 'format', 'numerics', 'shaders'],
  reference: ['util', 'format', 'numerics'],
  node: ['util', 'format'],
  model: ['util', 'format', 'numerics', 'gpu'],
  parity: ['util', 'format', 'numerics', 'gpu', 'model', 'reference', 'package.json'],
  bench: ['util', 'format', 'numerics', 'gpu', 'model', 'parity', 'reference'],
  worker: ['util', 'format', 'numerics', 'gpu', 'model', 'parity', 'reference', 'bench'],
  cli: ['util', 'format', 'numerics', 'gpu', 'model', 'parity', 'reference', 'bench', 'node'],
  ui: ['util', 'format', 'numerics', 'gpu', 'model', 'parity', 'reference', 'worker'],
};

function* tsFiles(dir) {
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) yield* tsFiles(p);
    else if (/\.tsx?$/.test(name)) yield p;
  }
}

/** The top-level folder of a path under the repository: `model` for src/model/x.ts, `shaders` for shaders/a.wgsl. */
function layerOf(file) {
  const rel = path.relative(src, file);
  if (!rel.startsWith('..')) return rel.split(path.sep)[0];
  const top = path.relative(root, file).split(path.sep)[0];
  return top === 'shaders' || top === 'package.json' ? top : null;
}

const unknownLayers = new Set();
const offences = [];
let imports = 0;
for (const file of tsFiles(src)) {
  const from = layerOf(file);
  if (!(from in ALLOWED)) {
    unknownLayers.add(from);
    continue;
  }
  const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  for (const ref of info.importedFiles) {
    const spec = ref.fileName.replace(/\?.*$/, '');
    if (!spec.startsWith('.')) continue; // packages and node: builtins
    imports++;
    const to = layerOf(path.resolve(path.dirname(file), spec));
    if (to === from) continue;
    if (to === null || !ALLOWED[from].includes(to))
      offences.push(`${path.relative(root, file)}: imports ${ref.fileName} (${from} -> ${to ?? 'outside src'})`);
  }
}
for (const l of unknownLayers) offences.push(`src/${l}/: a folder the layering does not name (add it to ALLOWED)`);
if (offences.length) {
  console.error(`layering: ${offences.length} import(s) against the declared order (scripts/check-layers.mjs):`);
  for (const o of offences) console.error(`  ${o}`);
  process.exit(1);
}
console.log(
  `layering: ${imports} relative imports across ${Object.keys(ALLOWED).length} layers, none against the order`,
);
