/**
 * The two drop zones (target, assistant): folder drop or folder picker, load progress with Cancel, the
 * loaded model's summary, and the engine's error message verbatim in place. The engine does every check
 * (safetensors, config, role, target/assistant fit); this module only routes files and shows results.
 */
import { settledProgress, type EngineProxy } from '../common/engine-client.ts';
import type { LoadedSummary, Role } from '../../worker/engine.ts';
import type { Progress } from '../../util/cancel.ts';
import { append, clear, el } from '../common/dom.ts';
import { fmtBytes, fmtInt, fmtMs, shortDigest } from '../common/format.ts';
import { captureDrop, ensureReadPermission, fromDirectoryHandle, fromFileList, type PickedFolder } from './folder-walk.ts';
import { listRecent, rememberCheckpoint, type RecentCheckpoint } from '../common/recent.ts';

const ROLE_TEXT: Record<Role, { title: string; hint: string }> = {
  target: { title: 'Target model', hint: 'Drop the MLX checkpoint folder (config.json + *.safetensors) here' },
  assistant: { title: 'MTP assistant', hint: 'Drop the assistant (drafter) folder here — optional for the probe' },
};

export interface Intake {
  root: HTMLElement;
  load(role: Role, folder: PickedFolder): Promise<boolean>;
  loaded(): Partial<Record<Role, LoadedSummary>>;
  busy(): boolean;
}

let jobCounter = 0;

export function createIntake(engine: EngineProxy, onChange: () => void): Intake {
  const state: Partial<Record<Role, LoadedSummary>> = {};
  const running = new Set<Role>();
  const recentList = el('ul', { class: 'recent', 'data-testid': 'recent' });
  const zones = {} as Record<Role, ReturnType<typeof createZone>>;

  async function load(role: Role, folder: PickedFolder): Promise<boolean> {
    const z = zones[role];
    if (running.has(role)) {
      z.showError('A load is already running in this zone: cancel it first.');
      return false;
    }
    running.add(role);
    onChange();
    const jobId = `load-${role}-${++jobCounter}`;
    z.start(folder, () => void engine.cancel(jobId));
    try {
      const files = folder.files.map(({ path, file }) => ({ path, file }));
      const progress = settledProgress((p: Progress) => z.progress(p));
      const summary = await engine.loadCheckpoint(role, { label: folder.label, files }, jobId, progress.callback).finally(progress.close);
      state[role] = summary;
      z.loaded(summary);
      const entry: RecentCheckpoint = { role, label: summary.label, modelType: summary.modelType, digest: summary.digest, bytes: summary.bytes, when: Date.now(), ...(folder.handle ? { handle: folder.handle } : {}) };
      void rememberCheckpoint(entry).then(renderRecent);
      return true;
    } catch (e) {
      // The engine drops the previous checkpoint of the role only when the upload starts, so a failure
      // before that (bad file, wrong role, mismatch) leaves the previous one loaded and still shown. Asked,
      // not inferred from progress messages (those can arrive after the call has failed).
      if (!(await engine.isLoaded(role).catch(() => false))) delete state[role];
      const message = (e as Error)?.message ?? String(e);
      if ((e as Error)?.name === 'CancelledError' || message === 'Cancelled by the user.') z.cancelled(state[role]);
      else z.failed(message, state[role]);
      return false;
    } finally {
      running.delete(role);
      onChange();
    }
  }

  function createZone(role: Role) {
    const t = ROLE_TEXT[role];
    const input = el('input', { type: 'file', webkitdirectory: true, multiple: true, class: 'sr-only', tabindex: -1, 'data-testid': `${role}-files`, 'aria-label': `${t.title} folder` });
    const choose = el('button', { type: 'button', class: 'secondary', 'data-testid': `${role}-choose` }, 'Choose folder…');
    const status = el('div', { class: 'zone-status', 'aria-live': 'polite' });
    const summaryBox = el('div', { 'data-testid': `${role}-summary-box` });
    const zone = el('div', { class: 'zone', 'data-role': role, 'data-state': 'empty', 'data-testid': `${role}-zone`, role: 'group', 'aria-label': `${t.title} drop zone` },
      el('h3', {}, t.title),
      el('p', { class: 'hint' }, t.hint),
      el('div', { class: 'row tight' }, choose, input),
      status,
      summaryBox);

    choose.addEventListener('click', () => input.click());
    input.addEventListener('change', () => {
      if (input.files && input.files.length) void load(role, fromFileList(input.files));
      input.value = '';
    });
    zone.addEventListener('dragover', (e) => {
      e.preventDefault();
      if (e.dataTransfer) e.dataTransfer.dropEffect = 'copy';
      zone.classList.add('over');
    });
    zone.addEventListener('dragleave', () => zone.classList.remove('over'));
    zone.addEventListener('drop', (e) => {
      e.preventDefault();
      zone.classList.remove('over');
      if (!e.dataTransfer) return;
      const picked = captureDrop(e.dataTransfer);
      void picked.then((f) => load(role, f), (err: Error) => showError(`Could not read the dropped folder: ${err.message}`));
    });

    function showSummary(s: LoadedSummary | undefined) {
      clear(summaryBox);
      if (!s) return;
      const kv: [string, string][] = [
        ['Type', s.modelType],
        ['Layers', fmtInt(s.layers)],
        ['Hidden', fmtInt(s.hidden)],
        ['Heads', fmtInt(s.heads)],
        ['Window', fmtInt(s.window)],
        ['Vocab', fmtInt(s.vocab)],
        ['Quantization', s.quantization],
        ['Size', `${fmtBytes(s.bytes)} in ${fmtInt(s.tensors)} tensors${s.ignoredTensors ? ` (${fmtInt(s.ignoredTensors)} vision/audio ignored)` : ''}`],
        ['Digest', shortDigest(s.digest)],
        ['Loaded', `${fmtMs(s.loadMs)}${s.hasTokenizer ? ' · tokenizer found' : ''}`],
      ];
      append(summaryBox, el('p', { class: 'loaded-name' }, el('strong', {}, s.label)),
        el('dl', { class: 'kv compact', 'data-testid': `${role}-summary` }, ...kv.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])));
    }
    function showError(message: string) {
      clear(status);
      append(status, el('p', { class: 'error', role: 'alert', 'data-testid': `${role}-error` }, message));
    }
    // data-load-count changes each time a load settles (loaded, failed or cancelled): tests wait on it.
    let settled = 0;
    const setState = (s: string) => {
      zone.setAttribute('data-state', s);
      if (s !== 'loading') zone.setAttribute('data-load-count', String(++settled));
    };

    let bar: HTMLProgressElement | undefined;
    let detail: HTMLElement | undefined;
    return {
      showError,
      start(folder: PickedFolder, cancel: () => void) {
        setState('loading');
        clear(status);
        bar = el('progress', { max: 1, value: 0, 'aria-label': `${t.title} load progress` });
        detail = el('span', { class: 'small', 'data-testid': `${role}-progress` }, `Opening ${folder.label} (${folder.files.length} files)…`);
        const cancelBtn = el('button', { type: 'button', class: 'secondary small-btn', 'data-testid': `${role}-cancel` }, 'Cancel');
        cancelBtn.addEventListener('click', () => {
          cancelBtn.disabled = true;
          cancel();
        });
        append(status, el('div', { class: 'progress-row' }, bar, cancelBtn), detail);
        choose.disabled = true;
      },
      progress(p: Progress) {
        if (!bar || !detail) return;
        bar.max = Math.max(1, Number(p.total) || 1);
        bar.value = Math.min(bar.max, Number(p.done) || 0);
        detail.textContent = p.phase === 'upload' ? `Uploading to the GPU: ${p.detail ?? ''}` : `${p.phase}: ${p.detail ?? ''}`;
      },
      loaded(s: LoadedSummary) {
        choose.disabled = false;
        setState('loaded');
        clear(status);
        showSummary(s);
      },
      failed(message: string, still: LoadedSummary | undefined) {
        choose.disabled = false;
        setState('error');
        showError(message);
        showSummary(still);
      },
      cancelled(still: LoadedSummary | undefined) {
        choose.disabled = false;
        setState(still ? 'loaded' : 'empty');
        clear(status);
        append(status, el('p', { class: 'muted small', 'data-testid': `${role}-cancelled` }, 'Load cancelled.'));
        showSummary(still);
      },
      zone,
    };
  }

  async function renderRecent(list?: RecentCheckpoint[]) {
    const items = list ?? (await listRecent());
    clear(recentList);
    recentList.hidden = items.length === 0;
    for (const r of items) {
      const info = `${r.role} · ${r.modelType} · ${r.label} · ${fmtBytes(r.bytes)} · ${shortDigest(r.digest)}`;
      let action: HTMLElement;
      if (r.handle) {
        const b = el('button', { type: 'button', class: 'link' }, 'Reopen');
        b.addEventListener('click', async () => {
          try {
            if (!(await ensureReadPermission(r.handle!))) return zones[r.role].showError(`Permission to read ${r.label} was refused; drop the folder again.`);
            await load(r.role, await fromDirectoryHandle(r.handle!));
          } catch (e) {
            zones[r.role].showError(`Could not reopen ${r.label}: ${(e as Error).message}. Drop the folder again.`);
          }
        });
        action = b;
      } else {
        action = el('span', { class: 'muted' }, 'drop again');
      }
      append(recentList, el('li', {}, el('span', {}, info), ' ', action));
    }
  }

  zones.target = createZone('target');
  zones.assistant = createZone('assistant');
  void renderRecent();

  const root = el('div', { class: 'intake' },
    el('div', { class: 'zones' }, zones.target.zone, zones.assistant.zone),
    el('details', { class: 'recent-box' }, el('summary', {}, 'Recent checkpoints'), recentList));
  return { root, load, loaded: () => state, busy: () => running.size > 0 };
}
