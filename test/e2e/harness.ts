/**
 * End-to-end harness: a Vite dev server on 127.0.0.1 (random port) and Debian's Chromium driven by
 * playwright-core with WebGPU enabled (SwiftShader inside Chromium; see docs/WEBGPU-LINUX.md).
 */
import { afterAll, beforeAll } from 'vitest';
import { createServer, type ViteDevServer } from 'vite';
import { chromium, type Browser, type Page } from 'playwright-core';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';

export const SCREENSHOTS = path.resolve('test-results/screenshots');

export function chromiumPath(): string {
  const p = process.env.RINGSIDE_CHROMIUM ?? '/usr/bin/chromium';
  if (!existsSync(p)) {
    throw new Error(
      `Browser tests need Chromium at ${p}: run them with \`npm test\` (scripts/provision-webgpu.sh installs it).`,
    );
  }
  return p;
}

export async function startServer(): Promise<{ server: ViteDevServer; url: string }> {
  // No HMR and no file watching: saving a source file while a test runs (an editor working in the same
  // tree) would otherwise make Vite reload the page mid-test and drop the loaded checkpoints. The worker
  // is an optimizer entry too, so its dependencies are pre-bundled at start rather than found late.
  const server = await createServer({
    server: { host: '127.0.0.1', port: 0, strictPort: false, hmr: false, watch: null },
    optimizeDeps: { entries: ['index.html', 'src/worker/engine-worker.ts'] },
    logLevel: 'warn',
  });
  await server.listen();
  const addr = server.httpServer!.address();
  if (!addr || typeof addr === 'string') throw new Error('vite server has no address');
  return { server, url: `http://127.0.0.1:${addr.port}/` };
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: [
      '--enable-unsafe-webgpu',
      '--enable-webgpu-developer-features',
      '--no-sandbox',
      '--disable-gpu-sandbox',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
}

const uncaught = new WeakMap<Page, string[]>();
/** Uncaught exceptions of a page opened with newPage(). */
export const pageErrors = (page: Page): string[] => uncaught.get(page) ?? [];

export async function newPage(browser: Browser, url: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  uncaught.set(page, errors);
  await page.goto(url);
  return page;
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** A Vite server and a Chromium for the enclosing describe block: started before its tests, closed after. */
export function useServerAndBrowser(): { readonly url: string; readonly browser: Browser } {
  let server: ViteDevServer | undefined;
  const env = { url: '', browser: undefined as unknown as Browser };
  beforeAll(async () => {
    ({ server, url: env.url } = await startServer());
    env.browser = await launchBrowser();
  });
  afterAll(async () => {
    await env.browser?.close();
    await server?.close();
  });
  return env;
}
