/**
 * Which shader compiler made a report's numbers: the browser (or Node) and its version, the WebGPU engine
 * (Dawn, WebKit, Gecko's wgpu), the backend it compiles WGSL for (Metal, Vulkan, D3D12) and the floating-point
 * math mode that engine is known to ask of that backend's compiler, with where that is written. A verify row
 * equals the chain's row only where both run the same compiled instructions, and a relaxed compiler (Metal's)
 * may contract and reassociate two copies of one loop differently, so a report from a Mac has to say it was
 * computed under relaxed math.
 *
 * `compilerProvenance` is pure (user agent, adapter info, runtime in; the record out); `compilerHere` reads
 * them from the running page, worker or Node process.
 */

/** How the engine asks the backend compiler to treat floating-point math. */
export type MathMode =
  /** Metal's MTLMathModeRelaxed: contraction, reassociation, reciprocals, fast functions; Inf and NaN honoured. */
  | 'metal-relaxed'
  /** Metal's fastMathEnabled (MTLMathModeFast and fast functions): relaxed, and Inf / NaN may be assumed away. */
  | 'metal-fast'
  /** Dawn on Metal where the macOS version is not known: relaxed on macOS 15 and later, fast before. */
  | 'metal-relaxed-or-fast'
  /** SPIR-V with no fast-math flags: the Vulkan driver may still contract a * b + c into an fma. */
  | 'vulkan-default'
  /** D3DCOMPILE_IEEE_STRICTNESS on every shader (Dawn's default on D3D12). */
  | 'd3d-ieee-strict'
  | 'unknown';

export const MATH_MODES: readonly MathMode[] = [
  'metal-relaxed',
  'metal-fast',
  'metal-relaxed-or-fast',
  'vulkan-default',
  'd3d-ieee-strict',
  'unknown',
];

export interface CompilerProvenance {
  /** "Chrome 140.0.0.0", "Safari 26.0", "Firefox 141.0", "Edge 140.0.0.0", "Node v20.19.0"; "unknown". */
  browser: string;
  /** "macOS", "macOS 15.1" (where the version is known), "Linux", "Windows", "Android", "ChromeOS", "iOS"; "unknown". */
  os: string;
  /** "Dawn", "WebKit", "Gecko (wgpu)"; "unknown". */
  engine: string;
  /** "Metal", "Vulkan", "D3D12", "OpenGL ES"; "unknown". */
  backend: string;
  /** Where the backend was read: "adapter info" (a browser that reports it), else the OS the engine runs on. */
  backendFrom: string;
  mathMode: MathMode;
  /** The math mode in words, with the compiler option or pragma that sets it. */
  math: string;
  /** Where the engine sets it (a file in its source), or why it is not known. */
  mathSource: string;
}

/** Every field of the record, for validation and display (all are strings). */
export const COMPILER_FIELDS = [
  'browser',
  'os',
  'engine',
  'backend',
  'backendFrom',
  'mathMode',
  'math',
  'mathSource',
] as const satisfies readonly (keyof CompilerProvenance)[];

export type CompilerRuntime =
  | {
      kind: 'browser';
      /**
       * Chrome's user-agent client hint `platformVersion` ("15.1.0" on macOS 15.1), where it was read: the user
       * agent string itself says "Mac OS X 10_15_7" on every macOS since 11.
       */
      platformVersion?: string;
    }
  /** `process.version`, `process.platform` and `os.release()` (Darwin's kernel version on macOS). */
  | { kind: 'node'; version: string; platform: string; release?: string };

export interface CompilerInputs {
  /** navigator.userAgent; absent in Node 20 (Node 21 and later say "Node.js/21", which names no browser). */
  userAgent?: string;
  /** GPUAdapterInfo's `backend`, which Chrome exposes only with its WebGPU developer features on. */
  adapterBackend?: string;
  runtime: CompilerRuntime;
}

const DAWN_METAL = 'Dawn src/dawn/native/metal/ShaderModuleMTL.mm';
const WEBKIT_METAL = 'WebKit Source/WebGPU/WebGPU/ShaderModule.mm (compileOptions)';
const DAWN_VULKAN = 'Dawn src/dawn/native/vulkan/ShaderModuleVk.cpp (SPIR-V from Tint)';
const DAWN_D3D12 = 'Dawn src/dawn/native/d3d12/ComputePipelineD3D12.cpp (toggle d3d_disable_ieee_strictness off)';

interface Browser {
  name: string;
  version: string;
  engine: 'Dawn' | 'WebKit' | 'Gecko (wgpu)' | 'unknown';
}

/** The browser and its engine from a user agent string (the first rule that matches wins). */
function parseBrowser(ua: string): Browser {
  const m = (re: RegExp) => re.exec(ua)?.[1];
  // Every iOS browser runs WebKit, whatever its name.
  const ios = /\b(iPhone|iPad|iPod)\b/.test(ua);
  const rules: [string, RegExp, Browser['engine']][] = [
    ['Edge', /\bEdg(?:e|A|iOS)?\/([\d.]+)/, 'Dawn'],
    ['Opera', /\bOPR\/([\d.]+)/, 'Dawn'],
    ['Firefox', /\b(?:Firefox|FxiOS)\/([\d.]+)/, 'Gecko (wgpu)'],
    ['Chrome', /\b(?:HeadlessChrome|Chrome|Chromium|CriOS)\/([\d.]+)/, 'Dawn'],
    ['Safari', /\bVersion\/([\d.]+).*\bSafari\//, 'WebKit'],
  ];
  for (const [name, re, engine] of rules) {
    const version = m(re);
    if (version) return { name, version, engine: ios ? 'WebKit' : engine };
  }
  return { name: 'unknown', version: '', engine: ios ? 'WebKit' : 'unknown' };
}

type Os = 'macOS' | 'iOS' | 'Windows' | 'Android' | 'ChromeOS' | 'Linux' | 'unknown';

function parseOs(ua: string): Os {
  if (/\b(iPhone|iPad|iPod)\b/.test(ua)) return 'iOS';
  if (/\bMacintosh\b|\bMac OS X\b/.test(ua)) return 'macOS';
  if (/\bWindows\b/.test(ua)) return 'Windows';
  if (/\bAndroid\b/.test(ua)) return 'Android';
  if (/\bCrOS\b/.test(ua)) return 'ChromeOS';
  if (/\bLinux\b|\bX11\b/.test(ua)) return 'Linux';
  return 'unknown';
}

function nodeOs(platform: string): Os {
  return platform === 'darwin'
    ? 'macOS'
    : platform === 'win32'
      ? 'Windows'
      : platform === 'linux'
        ? 'Linux'
        : 'unknown';
}

/** The macOS major version from Darwin's kernel release (20 = macOS 11 ... 24 = macOS 15, 25 = macOS 26). */
export function macosFromDarwin(release: string | undefined): number | undefined {
  const d = Number.parseInt(release ?? '', 10);
  if (!Number.isFinite(d) || d < 20) return undefined;
  return d <= 24 ? d - 9 : d + 1;
}

/** The backend each engine uses on an OS by default (Chrome's WebGPU: Metal, D3D12, Vulkan elsewhere). */
function defaultBackend(engine: Browser['engine'], os: Os): string {
  if (os === 'macOS' || os === 'iOS') return engine === 'unknown' ? 'unknown' : 'Metal';
  if (engine === 'WebKit' || engine === 'unknown') return 'unknown';
  if (os === 'Windows') return 'D3D12';
  if (os === 'Linux' || os === 'Android' || os === 'ChromeOS') return 'Vulkan';
  return 'unknown';
}

/** GPUAdapterInfo.backend ("metal", "vulkan", "d3d12", "opengles", ...) in the record's words. */
function backendName(b: string): string | undefined {
  const k = b.toLowerCase().replace(/[^a-z0-9]/g, '');
  const names: Record<string, string> = {
    metal: 'Metal',
    vulkan: 'Vulkan',
    d3d12: 'D3D12',
    d3d11: 'D3D11',
    opengl: 'OpenGL',
    opengles: 'OpenGL ES',
  };
  return names[k];
}

interface MathRecord {
  mathMode: MathMode;
  math: string;
  mathSource: string;
}

const UNKNOWN_MATH = (why: string): MathRecord => ({ mathMode: 'unknown', math: 'unknown', mathSource: why });

/** The math mode an engine is known to compile a backend's shaders with. */
function mathFor(engine: Browser['engine'], backend: string, macos: number | undefined, safari?: number): MathRecord {
  if (engine === 'Dawn' && backend === 'Metal') {
    if (macos !== undefined && macos >= 15)
      return {
        mathMode: 'metal-relaxed',
        math: 'Metal relaxed math (#pragma METAL fp math_mode(relaxed), macOS 15 and later)',
        mathSource: DAWN_METAL,
      };
    if (macos !== undefined)
      return {
        mathMode: 'metal-fast',
        math: 'Metal fast math (MTLCompileOptions.fastMathEnabled, before macOS 15)',
        mathSource: DAWN_METAL,
      };
    return {
      mathMode: 'metal-relaxed-or-fast',
      math: 'Metal relaxed math (#pragma METAL fp math_mode(relaxed)) on macOS 15 and later, fastMathEnabled before; which macOS is not known here',
      mathSource: DAWN_METAL,
    };
  }
  if (engine === 'WebKit' && backend === 'Metal') {
    // WebKit compiles with MTLMathModeRelaxed + fast functions where WebGPU is on by default (Safari 26), and with
    // fastMathEnabled in the builds before, where WebGPU sat behind a feature flag.
    if (safari !== undefined && safari >= 26)
      return {
        mathMode: 'metal-relaxed',
        math: 'Metal relaxed math (MTLMathModeRelaxed) with fast FP32 functions (MTLMathFloatingPointFunctionsFast)',
        mathSource: WEBKIT_METAL,
      };
    return {
      mathMode: 'metal-relaxed-or-fast',
      math: 'Metal relaxed math (MTLMathModeRelaxed, MTLMathFloatingPointFunctionsFast) where WebGPU is on by default, fastMathEnabled in builds before',
      mathSource: WEBKIT_METAL,
    };
  }
  if (engine === 'Dawn' && backend === 'Vulkan')
    return {
      mathMode: 'vulkan-default',
      math: 'SPIR-V without fast-math flags; the Vulkan driver may still contract a * b + c into an fma',
      mathSource: DAWN_VULKAN,
    };
  if (engine === 'Dawn' && backend === 'D3D12')
    return {
      mathMode: 'd3d-ieee-strict',
      math: 'D3DCOMPILE_IEEE_STRICTNESS on every shader',
      mathSource: DAWN_D3D12,
    };
  if (engine === 'Gecko (wgpu)') return UNKNOWN_MATH('not recorded for Firefox (wgpu and naga)');
  return UNKNOWN_MATH(`not known for ${engine === 'unknown' ? 'an unknown engine' : engine} on ${backend}`);
}

/** The record for a user agent, an adapter and a runtime (browser or Node). */
export function compilerProvenance(i: CompilerInputs): CompilerProvenance {
  const fromAdapter = i.adapterBackend ? backendName(i.adapterBackend) : undefined;
  if (i.runtime.kind === 'node') {
    // npm `webgpu` is Dawn (dawn.node): Metal on macOS, D3D12 on Windows, Vulkan on Linux.
    const os = nodeOs(i.runtime.platform);
    const macos = os === 'macOS' ? macosFromDarwin(i.runtime.release) : undefined;
    const backend = fromAdapter ?? defaultBackend('Dawn', os);
    return {
      browser: `Node ${i.runtime.version}`,
      os: macos !== undefined ? `macOS ${macos}` : os,
      engine: 'Dawn',
      backend,
      backendFrom: fromAdapter ? 'adapter info' : `Node platform ${i.runtime.platform}`,
      ...mathFor('Dawn', backend, macos),
    };
  }
  const ua = i.userAgent ?? '';
  const browser = parseBrowser(ua);
  const os = parseOs(ua);
  // Client hints give Chrome's real macOS version ("15.1.0"); the user agent string never does.
  const hinted = os === 'macOS' ? Number.parseInt(i.runtime.platformVersion ?? '', 10) : Number.NaN;
  const macos = Number.isFinite(hinted) && hinted >= 10 ? hinted : undefined;
  const backend = fromAdapter ?? defaultBackend(browser.engine, os);
  const safari = browser.name === 'Safari' ? Number.parseFloat(browser.version) : undefined;
  return {
    browser: browser.name === 'unknown' ? 'unknown' : `${browser.name} ${browser.version}`,
    os: macos !== undefined ? `macOS ${i.runtime.platformVersion}` : os,
    engine: browser.engine,
    backend,
    backendFrom: fromAdapter ? 'adapter info' : os === 'unknown' ? 'unknown' : `user agent (${os})`,
    ...mathFor(browser.engine, backend, macos, safari),
  };
}

/** One line for the page and the PNG: "Chrome 140.0.0.0 on macOS · Dawn → Metal · Metal relaxed math (...)". */
export function compilerLine(c: CompilerProvenance): string {
  return `${c.browser} on ${c.os} · ${c.engine} → ${c.backend} · ${c.math}`;
}

// ---- the running environment -------------------------------------------------------------------

interface UaData {
  getHighEntropyValues?(hints: string[]): Promise<{ platformVersion?: string }>;
}

let platformVersion: string | undefined;
// Chrome's client hints carry the real macOS version; they are asked once, when this module loads, so that a
// report made later (a probe takes seconds) can say which of Dawn's two Metal math settings applied.
try {
  const uaData = (globalThis as { navigator?: { userAgentData?: UaData } }).navigator?.userAgentData;
  uaData
    ?.getHighEntropyValues?.(['platformVersion'])
    .then((v) => {
      if (typeof v.platformVersion === 'string') platformVersion = v.platformVersion;
    })
    .catch(() => undefined);
} catch {
  // no client hints: the record says what it can without them
}

interface NodeProcess {
  version: string;
  platform: string;
  versions?: { node?: string };
  getBuiltinModule?(id: string): unknown;
}

/** The record for the running page, worker or Node process, and the adapter the report was made on. */
export function compilerHere(adapterBackend?: string): CompilerProvenance {
  const proc = (globalThis as { process?: NodeProcess }).process;
  if (proc?.versions?.node) {
    // os.release() through getBuiltinModule (Node 20.16+): this module is also bundled for the page.
    const os = proc.getBuiltinModule?.('node:os') as { release(): string } | undefined;
    return compilerProvenance({
      adapterBackend,
      runtime: { kind: 'node', version: proc.version, platform: proc.platform, release: os?.release() },
    });
  }
  const ua = (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent;
  return compilerProvenance({ userAgent: ua, adapterBackend, runtime: { kind: 'browser', platformVersion } });
}
