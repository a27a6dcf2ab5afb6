/**
 * The compiler record every report carries (src/parity/compiler-provenance.ts), from real user-agent strings:
 * Chrome and Safari on a Mac (Metal, relaxed math, each engine's own setting), Chrome on Linux (Dawn on Vulkan),
 * the Node CLI (Dawn through npm `webgpu`), and the browsers the record only partly knows. Then how reports carry
 * it: validation accepts it and old reports without it, and refuses one whose fields are not text.
 */
import { describe, expect, it } from 'vitest';
import os from 'node:os';
import {
  compilerHere,
  compilerLine,
  compilerProvenance,
  macosFromDarwin,
} from '../../src/parity/compiler-provenance.ts';
import { provenance } from '../../src/parity/provenance.ts';
import { validateReport } from '../../src/parity/report.ts';
import { readReport } from '../../src/ui/report/report-model.ts';
import { equalReport } from '../e2e/sample-report.ts';
import { asJson } from '../e2e/sample-trace.ts';

// User agents as the browsers send them (Chrome's reduced form: the minor version reads 0.0.0, and every macOS
// since 11 reads "Mac OS X 10_15_7").
const CHROME_MAC =
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36';
const SAFARI_MAC =
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/26.0 Safari/605.1.15';
const SAFARI_18_MAC =
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.6 Safari/605.1.15';
const CHROME_LINUX =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36';
const HEADLESS_LINUX =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/140.0.7339.185 Safari/537.36';
const EDGE_WINDOWS =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36 Edg/140.0.0.0';
const FIREFOX_MAC = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:141.0) Gecko/20100101 Firefox/141.0';
const CHROME_IOS =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 18_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/140.0.7339.122 Mobile/15E148 Safari/604.1';

const browser = (userAgent: string, platformVersion?: string, adapterBackend?: string) =>
  compilerProvenance({ userAgent, adapterBackend, runtime: { kind: 'browser', platformVersion } });

describe('the compiler record from a user agent', () => {
  it('Chrome on macOS: Dawn on Metal, relaxed on macOS 15 and later, fast math before, both where unknown', () => {
    const c = browser(CHROME_MAC);
    expect(c).toEqual({
      browser: 'Chrome 140.0.0.0',
      os: 'macOS',
      engine: 'Dawn',
      backend: 'Metal',
      backendFrom: 'user agent (macOS)',
      mathMode: 'metal-relaxed-or-fast',
      math: 'Metal relaxed math (#pragma METAL fp math_mode(relaxed)) on macOS 15 and later, fastMathEnabled before; which macOS is not known here',
      mathSource: 'Dawn src/dawn/native/metal/ShaderModuleMTL.mm',
    });
    // Chrome's client hints say which macOS it is
    expect(browser(CHROME_MAC, '15.1.0')).toMatchObject({
      os: 'macOS 15.1.0',
      mathMode: 'metal-relaxed',
      math: 'Metal relaxed math (#pragma METAL fp math_mode(relaxed), macOS 15 and later)',
    });
    expect(browser(CHROME_MAC, '14.7.1')).toMatchObject({
      os: 'macOS 14.7.1',
      mathMode: 'metal-fast',
      math: 'Metal fast math (MTLCompileOptions.fastMathEnabled, before macOS 15)',
    });
    expect(compilerLine(browser(CHROME_MAC, '15.1.0'))).toBe(
      'Chrome 140.0.0.0 on macOS 15.1.0 · Dawn → Metal · Metal relaxed math (#pragma METAL fp math_mode(relaxed), macOS 15 and later)',
    );
  });

  it('Safari on macOS: WebKit on Metal, MTLMathModeRelaxed with fast functions', () => {
    expect(browser(SAFARI_MAC)).toEqual({
      browser: 'Safari 26.0',
      os: 'macOS',
      engine: 'WebKit',
      backend: 'Metal',
      backendFrom: 'user agent (macOS)',
      mathMode: 'metal-relaxed',
      math: 'Metal relaxed math (MTLMathModeRelaxed) with fast FP32 functions (MTLMathFloatingPointFunctionsFast)',
      mathSource: 'WebKit Source/WebGPU/WebGPU/ShaderModule.mm (compileOptions)',
    });
    // before WebGPU was on by default, WebKit's builds set fastMathEnabled: the record says both
    expect(browser(SAFARI_18_MAC)).toMatchObject({ browser: 'Safari 18.6', mathMode: 'metal-relaxed-or-fast' });
  });

  it('Chrome on Linux (headed and headless): Dawn on Vulkan, SPIR-V without fast-math flags', () => {
    for (const [ua, name] of [
      [CHROME_LINUX, 'Chrome 140.0.0.0'],
      [HEADLESS_LINUX, 'Chrome 140.0.7339.185'],
    ])
      expect(browser(ua)).toEqual({
        browser: name,
        os: 'Linux',
        engine: 'Dawn',
        backend: 'Vulkan',
        backendFrom: 'user agent (Linux)',
        mathMode: 'vulkan-default',
        math: 'SPIR-V without fast-math flags; the Vulkan driver may still contract a * b + c into an fma',
        mathSource: 'Dawn src/dawn/native/vulkan/ShaderModuleVk.cpp (SPIR-V from Tint)',
      });
  });

  it('the adapter backend, where the browser reports it, wins over the OS default', () => {
    // Chrome with its WebGPU developer features on reports GPUAdapterInfo.backend
    expect(browser(CHROME_LINUX, undefined, 'metal')).toMatchObject({ backend: 'Metal', backendFrom: 'adapter info' });
    expect(browser(EDGE_WINDOWS, undefined, 'vulkan')).toMatchObject({ backend: 'Vulkan', mathMode: 'vulkan-default' });
  });

  it('Edge on Windows, Firefox on a Mac, Chrome on an iPhone, and an unknown agent', () => {
    expect(browser(EDGE_WINDOWS)).toMatchObject({
      browser: 'Edge 140.0.0.0',
      os: 'Windows',
      engine: 'Dawn',
      backend: 'D3D12',
      mathMode: 'd3d-ieee-strict',
    });
    expect(browser(FIREFOX_MAC)).toMatchObject({
      browser: 'Firefox 141.0',
      engine: 'Gecko (wgpu)',
      backend: 'Metal',
      mathMode: 'unknown',
      mathSource: 'not recorded for Firefox (wgpu and naga)',
    });
    // every iOS browser is WebKit underneath
    expect(browser(CHROME_IOS)).toMatchObject({ os: 'iOS', engine: 'WebKit', backend: 'Metal' });
    expect(browser('curl/8.5.0')).toMatchObject({
      browser: 'unknown',
      engine: 'unknown',
      backend: 'unknown',
      mathMode: 'unknown',
    });
  });
});

describe('the compiler record in Node (the CLI: Dawn through npm webgpu)', () => {
  it('Linux: Vulkan; macOS: Metal, its version from the Darwin release', () => {
    expect(compilerProvenance({ runtime: { kind: 'node', version: 'v20.19.0', platform: 'linux' } })).toEqual({
      browser: 'Node v20.19.0',
      os: 'Linux',
      engine: 'Dawn',
      backend: 'Vulkan',
      backendFrom: 'Node platform linux',
      mathMode: 'vulkan-default',
      math: 'SPIR-V without fast-math flags; the Vulkan driver may still contract a * b + c into an fma',
      mathSource: 'Dawn src/dawn/native/vulkan/ShaderModuleVk.cpp (SPIR-V from Tint)',
    });
    const mac = (release: string) =>
      compilerProvenance({ runtime: { kind: 'node', version: 'v22.12.0', platform: 'darwin', release } });
    expect(mac('24.1.0')).toMatchObject({ os: 'macOS 15', backend: 'Metal', mathMode: 'metal-relaxed' });
    expect(mac('23.6.0')).toMatchObject({ os: 'macOS 14', mathMode: 'metal-fast' });
    expect([19, 20, 24, 25].map((d) => macosFromDarwin(`${d}.0.0`))).toEqual([undefined, 11, 15, 26]);
  });

  it('this process: the record compilerHere gives, and the one every report now carries', () => {
    const here = compilerHere();
    expect(here).toEqual(
      compilerProvenance({
        runtime: { kind: 'node', version: process.version, platform: process.platform, release: os.release() },
      }),
    );
    const p = provenance(equalReport().provenance.adapter, 'node', {
      policy: 'exact',
      precision: 'f32',
      block: 4,
      drawLengths: [8],
      prefillChunk: 512,
      target: equalReport().provenance.target,
    });
    expect(p.compiler).toEqual(here);
  });
});

describe('reports carry the record', () => {
  it('validate with it and without it (reports made before), and refuse one whose fields are not text', () => {
    const withIt = asJson({
      ...equalReport(),
      provenance: { ...equalReport().provenance, compiler: browser(CHROME_MAC) },
    });
    expect(validateReport(withIt)).toEqual([]);
    const read = readReport(withIt);
    if (!read.ok) throw new Error(read.problems.join('; '));
    expect(read.report.provenance.compiler).toEqual(browser(CHROME_MAC));
    const old = asJson(equalReport()) as Record<string, any>;
    delete old.provenance.compiler;
    expect(validateReport(old)).toEqual([]);
    const bad = asJson(withIt) as Record<string, any>;
    bad.provenance.compiler.backend = 3;
    expect(validateReport(bad)).toEqual(['provenance.compiler.backend must be a string']);
    bad.provenance.compiler = 'Metal';
    expect(validateReport(bad)).toEqual(['provenance.compiler must be an object']);
  });
});
