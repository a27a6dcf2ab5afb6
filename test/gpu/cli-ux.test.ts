/**
 * The command line as a first use meets it, on the GPU: probe and trace without --report write to reports/ and say
 * where; Dawn's routine warnings held back unless --verbose; lavapipe taken without the provisioning `eval` when no
 * Vulkan driver is configured; a model named by its Hub id read from the local Hugging Face cache gives the same
 * bytes as its folder.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cachedLavapipe } from '../../src/cli/software-adapter.ts';
import { findVulkanDrivers } from '../../src/cli/vulkan-drivers.ts';
import { cliRun } from '../support/cli-run.ts';
import { DEMO, GEMMA4_E_TINY } from '../support/fixtures.ts';
import { makeHubCache } from '../support/hub-cache.ts';

const TARGET = path.join(GEMMA4_E_TINY, 'target');
/** Lines that name a report written under reports/. */
const written = (out: string) => /report written to (reports\/\w+-\d{8}-\d{6}\.json)/.exec(out)?.[1];
/** The JSON document `info` prints, from its output (stdout, then stderr's lines after it). */
const infoJson = (out: string) => JSON.parse(out.slice(out.indexOf('{'), out.lastIndexOf('}') + 1));

describe('npm run cli, as a first use meets it', () => {
  it('probe and trace without --report print their summary and write reports/<command>-<time>.json', async () => {
    const cwd = mkdtempSync(path.join(tmpdir(), 'ringside-default-report-'));
    const p = await cliRun(['probe', '--target', TARGET], cwd);
    expect(p.code, p.out).toBe(0);
    expect(p.out).toMatch(/^block-versus-chain probe passed: 4 draws/m);
    const probeFile = written(p.out);
    expect(probeFile).toMatch(/^reports\/probe-/);
    expect(JSON.parse(readFileSync(path.join(cwd, probeFile!), 'utf8')).verdict).toBe('equal');

    const t = await cliRun(['trace', '--target', TARGET, '--prefix', '24', '--traced', '8'], cwd);
    expect(t.code, t.out).toBe(0);
    expect(t.out).toMatch(/^teacher-forced trace: all 8 block rows equal the chain byte for byte/m);
    const traceFile = written(t.out);
    expect(traceFile).toMatch(/^reports\/trace-/);
    expect(JSON.parse(readFileSync(path.join(cwd, traceFile!), 'utf8')).metrics.positions).toBe(8);
  }, 300_000);

  it("Dawn's warnings are held back unless --verbose", async () => {
    const quiet = await cliRun(['info']);
    expect(quiet.code).toBe(0);
    expect(quiet.out).not.toMatch(/^Warning: /m);
    const report = infoJson(quiet.out);
    const loud = await cliRun(['info', '--verbose']);
    expect(loud.code).toBe(0);
    // Dawn clamps the dynamic-buffer limits of lavapipe and SwiftShader with these two warnings; other adapters
    // may have nothing to clamp, so there the check is only that --verbose lets Dawn's lines through unchanged.
    if (/llvmpipe|swiftshader/i.test(report.description))
      expect(loud.out).toMatch(/^Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced/m);
    expect(loud.out.replace(/^Warning: .*\n/gm, '')).toBe(quiet.out);
  }, 120_000);

  it('with no Vulkan driver configured, the CLI takes the provisioned lavapipe by itself and says so', async () => {
    const lavapipe = cachedLavapipe();
    // the GPU tests run after scripts/provision-webgpu.sh, which puts it there
    expect(lavapipe, 'scripts/provision-webgpu.sh has not provisioned .cache/lavapipe').toBeDefined();
    const empty = mkdtempSync(path.join(tmpdir(), 'ringside-no-icd-'));
    const env = {
      VK_ICD_FILENAMES: '',
      VK_DRIVER_FILES: '',
      LD_LIBRARY_PATH: '',
      HOME: empty,
      XDG_CONFIG_DIRS: empty,
      XDG_DATA_HOME: empty,
      XDG_DATA_DIRS: empty,
    };
    // /etc/vulkan/icd.d and /etc/xdg/vulkan/icd.d stay in the loader's search: a machine with a driver there uses it
    if (findVulkanDrivers(env).usable.length) return;
    const r = await cliRun(['info'], undefined, 120_000, env);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain(
      `(lavapipe, the software driver scripts/provision-webgpu.sh put in ${path.dirname(lavapipe!)}: no Vulkan driver is configured)`,
    );
    expect(r.out).toMatch(/^adapter: llvmpipe/m);
    expect(infoJson(r.out).description).toMatch(/llvmpipe/);
  }, 120_000);

  it('--model ORG/NAME from a Hugging Face cache of symlinked blobs gives the bytes its folder gives', async () => {
    const { cache } = makeHubCache('ringside-test/demo', path.join(DEMO, 'target'));
    const dir = mkdtempSync(path.join(tmpdir(), 'ringside-hub-forward-'));
    const out = (name: string) => path.join(dir, `${name}.safetensors`);
    const args = ['--tokens', '2,10,20,30', '--activations'];
    const viaHub = await cliRun(
      ['forward', '--model', 'ringside-test/demo', ...args, '--out', out('hub')],
      undefined,
      120_000,
      {
        HF_HUB_CACHE: cache,
      },
    );
    expect(viaHub.code, viaHub.out).toBe(0);
    const direct = await cliRun(['forward', '--model', path.join(DEMO, 'target'), ...args, '--out', out('dir')]);
    expect(direct.code, direct.out).toBe(0);
    expect(existsSync(out('hub'))).toBe(true);
    expect(readFileSync(out('hub')).equals(readFileSync(out('dir')))).toBe(true);
  }, 180_000);
});
