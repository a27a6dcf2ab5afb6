/** The GPU adapter card: what WebGPU gave us, and the WGSL self-test run inside the Worker. */
import type { EngineProxy } from '../common/engine-client.ts';
import { byId, clear, el, append } from '../common/dom.ts';
import type { AdapterReport } from '../../gpu/device.ts';
import { limitProfile } from '../../gpu/limit-profiles.ts';
import { fmtBytes, fmtInt, fmtMs } from '../common/format.ts';

function describeAdapter(r: AdapterReport): HTMLElement {
  // decimal units, as the reports' provenance and the checkpoint sizes print them
  const bytes = (n: number | undefined) => (n === undefined ? '?' : fmtBytes(n));
  return el(
    'dl',
    { class: 'kv compact' },
    el('dt', {}, 'Adapter'),
    el('dd', {}, [r.vendor, r.architecture, r.description].filter(Boolean).join(' · ') || 'unnamed adapter'),
    el('dt', {}, 'Features'),
    el('dd', {}, r.features.join(', ') || 'none of shader-f16, subgroups, timestamp-query'),
    el('dt', {}, 'Max buffer'),
    el('dd', {}, `${bytes(r.limits.maxBufferSize)} (binding ${bytes(r.limits.maxStorageBufferBindingSize)})`),
    el('dt', {}, 'Workgroup'),
    el(
      'dd',
      {},
      `${fmtInt(r.limits.maxComputeInvocationsPerWorkgroup)} invocations, ${fmtBytes(r.limits.maxComputeWorkgroupStorageSize)} shared` +
        (r.subgroupMinSize ? `, subgroups ${r.subgroupMinSize}–${r.subgroupMaxSize}` : ''),
    ),
    ...(r.limitProfile
      ? [
          el('dt', {}, 'Limit profile'),
          el(
            'dd',
            { 'data-testid': 'limit-profile' },
            `${limitProfile(r.limitProfile).browser}'s limits and features (?limits=${r.limitProfile})`,
          ),
        ]
      : []),
  );
}

/** Fills #adapter; resolves true when a device is ready. */
export async function showAdapter(engine: EngineProxy): Promise<boolean> {
  const box = byId('adapter');
  try {
    const report = await engine.init();
    clear(box);
    append(box, describeAdapter(report));
    box.dataset.state = 'ready';
    return true;
  } catch (e) {
    clear(box);
    append(box, el('p', { class: 'error', role: 'alert' }, `WebGPU unavailable: ${(e as Error).message}`));
    box.dataset.state = 'unavailable';
    return false;
  }
}

export function wireSelfTest(engine: EngineProxy): void {
  const button = byId<HTMLButtonElement>('run-selftest');
  const status = byId('selftest-status');
  const list = byId('selftest-checks');
  button.disabled = false;
  button.addEventListener('click', async () => {
    button.disabled = true;
    status.textContent = 'Running…';
    status.dataset.state = 'running';
    clear(list);
    try {
      const r = await engine.selfTest();
      for (const c of r.checks) {
        append(
          list,
          el(
            'li',
            { class: c.skipped ? 'skip' : c.ok ? 'pass' : 'fail' },
            `${c.skipped ? '–' : c.ok ? '✓' : '✗'} ${c.name}: ${c.skipped ?? c.detail}`,
          ),
        );
      }
      status.textContent = r.ok ? `Self-test passed in ${fmtMs(r.ms)}` : 'Self-test FAILED';
      status.dataset.state = r.ok ? 'pass' : 'fail';
    } catch (e) {
      status.textContent = `Self-test error: ${(e as Error).message}`;
      status.dataset.state = 'fail';
    } finally {
      button.disabled = false;
    }
  });
}
