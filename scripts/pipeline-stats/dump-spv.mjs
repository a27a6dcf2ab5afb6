// Diagnostic (not part of the product): the SPIR-V that Dawn generates for WGSL compute pipelines, as
// binary .spv files for scripts/pipeline-stats/vkstats.py (which reads the Vulkan driver's pipeline statistics).
//
// Usage (repo root; locally after `eval "$(bash scripts/provision-webgpu.sh)"`, and `apt-get install spirv-tools`):
//   node --import tsx --import ./scripts/wgsl-hooks.mjs scripts/pipeline-stats/dump-spv.mjs OUTDIR \
//       NAME=FILE.wgsl:ENTRY[:CONST=V,CONST=V] ...
//
// For each spec, a child process (this script with --child) creates a device the way the product does
// (src/gpu/device.ts createGpuContext: same optional features, raised limits) from a Dawn instance with the
// `dump_shaders` toggle, expands `//#include "x.wgsl"` (src/gpu/shaders.ts expandIncludes), and creates
// the module and a compute pipeline (layout 'auto', the override constants). Dawn prints the SPIR-V
// disassembly from the native side to the process's stdout ("info:" + "/* Dumped SPIRV disassembly */"),
// so the parent captures the child's stdout and takes that block. One child per spec: exactly one
// pipeline per process, so there is no question which dump belongs to which pipeline.
//
// Writes OUTDIR/NAME.spvasm (Dawn's disassembly as is), OUTDIR/NAME.wgsl (the expanded WGSL),
// OUTDIR/NAME.spv (assembled with spirv-as), OUTDIR/NAME.entry (the OpEntryPoint name, e.g.
// "dawn_entry_point"), OUTDIR/NAME.json (spec, entry, LocalSize, capabilities, extensions, bindings).
//
// spirv-as of Debian's spirv-tools 2023.1 does not know `MaximallyReconvergesKHR` (ExecutionMode 6023,
// SPV_KHR_maximal_reconvergence); that operand is written as the raw word `!6023`, which gives the same
// binary. spirv-val is run on a copy without that one execution mode (the old validator rejects it).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);

function parseSpec(spec) {
  const m = /^([^=]+)=([^:]+):([^:]+)(?::(.*))?$/.exec(spec);
  if (!m) throw new Error(`bad spec "${spec}" (want NAME=FILE.wgsl:ENTRY[:CONST=V,CONST=V])`);
  const constants = {};
  for (const kv of (m[4] ?? '').split(',').filter(Boolean)) {
    const [k, v] = kv.split('=');
    if (v === undefined || !Number.isFinite(Number(v))) throw new Error(`bad constant "${kv}" in "${spec}"`);
    constants[k.trim()] = Number(v);
  }
  return { name: m[1], file: m[2], entry: m[3], constants };
}

// ---------------------------------------------------------------- child: one pipeline, dumped by Dawn
async function child(specJson) {
  const spec = JSON.parse(specJson);
  const { create, globals } = await import('webgpu');
  const { expandIncludes } = await import('../../src/gpu/shaders.ts');
  const { createGpuContext } = await import('../../src/gpu/device.ts');
  Object.assign(globalThis, globals);

  const code = expandIncludes(readFileSync(spec.file, 'utf8'));
  if (spec.wgslOut) writeFileSync(spec.wgslOut, code);

  const gpu = create(['enable-dawn-features=dump_shaders']);
  const ctx = await createGpuContext(gpu, { platform: 'dump-spv' });
  const device = ctx.device;
  process.stderr.write(`[child ${spec.name}] adapter: ${ctx.report?.description ?? ''} ${ctx.report?.device ?? ''}\n`);

  device.pushErrorScope('validation');
  const module = device.createShaderModule({ code, label: spec.name });
  const info = await module.getCompilationInfo();
  let bad = false;
  for (const msg of info.messages) {
    process.stderr.write(`[child ${spec.name}] ${msg.type} ${msg.lineNum}:${msg.linePos} ${msg.message}\n`);
    if (msg.type === 'error') bad = true;
  }
  const t0 = performance.now();
  device.createComputePipeline({
    layout: 'auto',
    label: spec.name,
    compute: { module, entryPoint: spec.entry, constants: spec.constants },
  });
  const err = await device.popErrorScope();
  process.stderr.write(
    `[child ${spec.name}] createComputePipeline ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
  );
  if (err) {
    process.stderr.write(`[child ${spec.name}] validation error: ${err.message}\n`);
    bad = true;
  }
  device.destroy();
  // process.exit -> exit(3) flushes the native stdio buffers that hold Dawn's dump.
  process.exit(bad ? 2 : 0);
}

// ---------------------------------------------------------------- parent
function extractSpirv(stdout) {
  const marker = '/* Dumped SPIRV disassembly */';
  const blocks = [];
  let at = stdout.indexOf(marker);
  while (at >= 0) {
    const start = stdout.indexOf('\n', at) + 1;
    // The block ends at the next Dawn log message ("info:" line) or at the end of the output.
    const rest = stdout.slice(start);
    const end = rest.search(/^(info|warning|error):\s*$/m);
    blocks.push(end >= 0 ? rest.slice(0, end) : rest);
    at = stdout.indexOf(marker, start);
  }
  return blocks;
}

function describe(spvasm) {
  const lines = spvasm.split('\n');
  const ep = lines.map((l) => /OpEntryPoint\s+(\w+)\s+(%\S+)\s+"([^"]*)"/.exec(l)).find(Boolean);
  if (!ep) throw new Error('no OpEntryPoint in the dump');
  const id = ep[2];
  const esc = id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const ls = spvasm.match(new RegExp(`OpExecutionMode\\s+${esc}\\s+LocalSize\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)`));
  const caps = [...spvasm.matchAll(/^\s*OpCapability\s+(\w+)/gm)].map((m) => m[1]);
  const exts = [...spvasm.matchAll(/^\s*OpExtension\s+"([^"]+)"/gm)].map((m) => m[1]);
  const modes = [...spvasm.matchAll(new RegExp(`^\\s*OpExecutionMode\\s+${esc}\\s+(.*)$`, 'gm'))].map((m) =>
    m[1].trim(),
  );
  // Bindings: OpDecorate %v DescriptorSet n / Binding n, the variable's storage class.
  const set = {};
  const binding = {};
  for (const m of spvasm.matchAll(/^\s*OpDecorate\s+(%\S+)\s+(DescriptorSet|Binding)\s+(\d+)/gm)) {
    (m[2] === 'DescriptorSet' ? set : binding)[m[1]] = Number(m[3]);
  }
  const bindings = Object.keys(binding).map((v) => {
    const e = v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const decl = spvasm.match(new RegExp(`^\\s*${e}\\s*=\\s*OpVariable\\s+\\S+\\s+(\\w+)`, 'm'));
    return { var: v, set: set[v] ?? 0, binding: binding[v], storageClass: decl ? decl[1] : '?' };
  });
  return {
    entry: ep[3],
    executionModel: ep[1],
    localSize: ls ? [Number(ls[1]), Number(ls[2]), Number(ls[3])] : null,
    executionModes: modes,
    capabilities: caps,
    extensions: exts,
    bindings,
  };
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  return r;
}

function parent(outdir, specs) {
  mkdirSync(outdir, { recursive: true });
  let failures = 0;
  // Without spirv-as (e.g. on the device machine) only the disassembly is written: diff it against the
  // one made here to check that Dawn generates the same SPIR-V on that adapter.
  const haveAs = spawnSync('spirv-as', ['--version']).status === 0;
  if (!haveAs) process.stderr.write('note: spirv-as not found: writing .spvasm/.entry/.json only, no .spv\n');
  const index = [];
  for (const raw of specs) {
    const spec = parseSpec(raw);
    const wgslOut = join(outdir, `${spec.name}.wgsl`);
    process.stderr.write(`== ${spec.name}: ${spec.file} entry ${spec.entry} ${JSON.stringify(spec.constants)}\n`);
    const t0 = Date.now();
    const r = spawnSync(
      process.execPath,
      [...process.execArgv, SELF, '--child', JSON.stringify({ ...spec, wgslOut })],
      {
        encoding: 'utf8',
        maxBuffer: 1 << 30,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    process.stderr.write(r.stderr.replace(/^Warning: maxDynamic.*\n/gm, ''));
    if (r.status !== 0) {
      process.stderr.write(`!! ${spec.name}: child exited with ${r.status ?? r.signal}\n`);
      failures++;
      continue;
    }
    const blocks = extractSpirv(r.stdout);
    if (blocks.length !== 1) {
      process.stderr.write(`!! ${spec.name}: expected one SPIR-V dump in the child's stdout, found ${blocks.length}\n`);
      writeFileSync(join(outdir, `${spec.name}.stdout.txt`), r.stdout);
      if (blocks.length === 0) {
        failures++;
        continue;
      }
    }
    const spvasm = blocks[blocks.length - 1];
    const base = join(outdir, spec.name);
    writeFileSync(`${base}.spvasm`, spvasm);
    const meta = { ...spec, wgslOut: undefined, ...describe(spvasm), seconds: (Date.now() - t0) / 1000 };
    writeFileSync(`${base}.entry`, `${meta.entry}\n`);
    index.push([spec.name, meta.entry, meta.localSize?.join('x'), raw].join('\t'));
    if (!haveAs) {
      writeFileSync(`${base}.json`, `${JSON.stringify(meta, null, 2)}\n`);
      process.stderr.write(`   -> ${base}.spvasm, entry "${meta.entry}", LocalSize ${meta.localSize?.join('x')}\n`);
      continue;
    }

    // Assemble. Execution modes the old assembler does not know are written as raw words.
    const RAW_MODES = { MaximallyReconvergesKHR: 6023 };
    let patched = spvasm;
    for (const [mode, value] of Object.entries(RAW_MODES)) {
      patched = patched.replace(new RegExp(`^(\\s*OpExecutionMode\\s+%\\S+\\s+)${mode}\\s*$`, 'gm'), `$1!${value}`);
    }
    writeFileSync(`${base}.as-input.spvasm`, patched);
    let as = null;
    for (const env of ['vulkan1.1spv1.4', 'spv1.4', 'vulkan1.2', 'vulkan1.3']) {
      const a = run('spirv-as', ['--target-env', env, `${base}.as-input.spvasm`, '-o', `${base}.spv`]);
      if (a.status === 0) {
        as = env;
        break;
      }
      process.stderr.write(`   spirv-as --target-env ${env}: ${a.stderr.trim()}\n`);
    }
    if (!as) {
      process.stderr.write(`!! ${spec.name}: spirv-as failed\n`);
      failures++;
      continue;
    }
    meta.assembledWith = `spirv-as --target-env ${as}`;
    // Validate a copy without the execution modes the old validator does not know.
    const forVal = spvasm.replace(
      new RegExp(`^\\s*OpExecutionMode\\s+%\\S+\\s+(${Object.keys(RAW_MODES).join('|')})\\s*$\\n?`, 'gm'),
      '',
    );
    writeFileSync('/tmp/dump-spv-val.spvasm', forVal);
    const va = run('spirv-as', ['--target-env', as, '/tmp/dump-spv-val.spvasm', '-o', '/tmp/dump-spv-val.spv']);
    const v = va.status === 0 ? run('spirv-val', ['--target-env', 'vulkan1.2', '/tmp/dump-spv-val.spv']) : va;
    meta.spirvVal = v.status === 0 ? 'ok (vulkan1.2, without MaximallyReconvergesKHR)' : `FAILED: ${v.stderr.trim()}`;
    writeFileSync(`${base}.json`, `${JSON.stringify(meta, null, 2)}\n`);
    const bytes = readFileSync(`${base}.spv`).length;
    process.stderr.write(
      `   -> ${base}.spv (${bytes} bytes), entry "${meta.entry}", LocalSize ${meta.localSize?.join('x')}, ` +
        `${meta.bindings.length} bindings, caps [${meta.capabilities.join(' ')}], spirv-val ${meta.spirvVal}, ${meta.seconds.toFixed(1)} s\n`,
    );
  }
  writeFileSync(join(outdir, 'index.tsv'), `${index.join('\n')}\n`);
  process.exit(failures ? 1 : 0);
}

const argv = process.argv.slice(2);
if (argv[0] === '--child') {
  await child(argv[1]);
} else if (argv.length < 2) {
  process.stderr.write(
    'usage: node --import tsx --import ./scripts/wgsl-hooks.mjs scripts/pipeline-stats/dump-spv.mjs OUTDIR NAME=FILE.wgsl:ENTRY[:CONST=V,...] ...\n',
  );
  process.exit(2);
} else {
  parent(resolve(argv[0]), argv.slice(1));
}
