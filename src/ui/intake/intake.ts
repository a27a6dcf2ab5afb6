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
import {
  captureDrop,
  ensureReadPermission,
  fromDirectoryHandle,
  fromFileList,
  type PickedFolder,
} from './folder-walk.ts';
import { listRecent, rememberCheckpoint, type RecentCheckpoint } from '../common/recent.ts';

const ROLE_TEXT: Record<Role, { title: string; hint: string }> = {
  target: {
    title: 'Target model',
    hint: 'Drop the MLX checkpoint folder (config.json + *.safetensors) here: Gemma 4, or Qwen3.5 / 3.6 with its mtp.* head',
  },
  assistant: {
    title: 'MTP assistant',
    hint: 'Drop the Gemma 4 assistant (drafter) folder here — optional for the probe; or a split Qwen3.5 MTP drafter folder (qwen3_5_mtp) to draft in place of the target’s own head',
  },
};

/**
 * Where a model fetched from the Hugging Face Hub already is (hf download, mlx-lm and mlx-vlm put it there): the
 * snapshot folder holds the checkpoint's files. Finder hides ~/.cache, so the way there is said too.
 */
const HUB_CACHE_HINT =
  'From the Hugging Face cache: ~/.cache/huggingface/hub/models--ORG--NAME/snapshots/<commit>/ (on a Mac, Finder’s Go to Folder, Cmd-Shift-G, takes that path; Cmd-Shift-. shows hidden folders).';

export interface Intake {
  root: HTMLElement;
  load(role: Role, folder: PickedFolder): Promise<boolean>;
  loaded(): Partial<Record<Role, LoadedSummary>>;
  busy(): boolean;
  /**
   * While `why` is set (a run is in progress) no folder is taken: the pickers are disabled and a drop shows `why`.
   * The engine refuses such a load too (Engine.startJob); this says so before any file is read.
   */
  lock(why: string | undefined): void;
}

let jobCounter = 0;

/** One drop zone: its element and what the intake tells it while a load runs and settles. */
interface Zone {
  zone: HTMLElement;
  showError(message: string): void;
  start(folder: PickedFolder, cancel: () => void): void;
  progress(p: Progress): void;
  loaded(s: LoadedSummary): void;
  failed(message: string, still: LoadedSummary | undefined): void;
  cancelled(still: LoadedSummary | undefined): void;
  /** Shows a new summary of the checkpoint already loaded here (another zone's load changed it). */
  refresh(s: LoadedSummary): void;
  /** Another zone's load dropped this zone's checkpoint: the message says why. */
  dropped(message: string): void;
  /** Disables or enables the folder picker (not while this zone's own load runs). */
  setLocked(on: boolean): void;
}

export function createIntake(engine: EngineProxy, onChange: () => void): Intake {
  const state: Partial<Record<Role, LoadedSummary>> = {};
  const running = new Set<Role>();
  const zones = {} as Record<Role, Zone>;

  let lockedWhy: string | undefined;
  async function load(role: Role, folder: PickedFolder): Promise<boolean> {
    const z = zones[role];
    if (lockedWhy) {
      z.showError(lockedWhy);
      return false;
    }
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
      const summary = await engine
        .loadCheckpoint(role, { label: folder.label, files }, jobId, progress.callback)
        .finally(progress.close);
      state[role] = summary;
      z.loaded(summary);
      // The load changed the other zone's checkpoint: a split drafter attached to the new target (or was dropped for
      // not fitting it), or the target's MTP line now names the drafter.
      const other = summary.other;
      if (other && 'summary' in other) {
        state[other.role] = other.summary;
        zones[other.role].refresh(other.summary);
      } else if (other) {
        delete state[other.role];
        zones[other.role].dropped(other.error);
      }
      void rememberCheckpoint(recentEntry(role, summary, folder)).then(recent.render);
      return true;
    } catch (e) {
      // The engine drops the previous checkpoint of the role only when the upload starts, so a failure
      // before that (bad file, wrong role, mismatch) leaves the previous one loaded and still shown. Asked,
      // not inferred from progress messages (those can arrive after the call has failed).
      if (!(await engine.isLoaded(role).catch(() => false))) delete state[role];
      const message = (e as Error)?.message ?? String(e);
      if (isCancellation(e, message)) z.cancelled(state[role]);
      else z.failed(message, state[role]);
      return false;
    } finally {
      running.delete(role);
      onChange();
    }
  }

  /** Reopens a remembered checkpoint from its directory handle, after the browser's permission prompt. */
  async function reopen(r: RecentCheckpoint): Promise<void> {
    try {
      if (!(await ensureReadPermission(r.handle!)))
        return zones[r.role].showError(`Permission to read ${r.label} was refused; drop the folder again.`);
      await load(r.role, await fromDirectoryHandle(r.handle!));
    } catch (e) {
      zones[r.role].showError(`Could not reopen ${r.label}: ${(e as Error).message}. Drop the folder again.`);
    }
  }

  zones.target = createZone('target', (f) => load('target', f));
  zones.assistant = createZone('assistant', (f) => load('assistant', f));
  const recent = createRecentList(reopen);
  void recent.render();

  const root = el(
    'div',
    { class: 'intake' },
    el('div', { class: 'zones' }, zones.target.zone, zones.assistant.zone),
    el('details', { class: 'recent-box' }, el('summary', {}, 'Recent checkpoints'), recent.root),
  );
  return {
    root,
    load,
    loaded: () => state,
    busy: () => running.size > 0,
    lock(why) {
      lockedWhy = why;
      for (const z of Object.values(zones)) z.setLocked(why !== undefined);
    },
  };
}

/** What the page remembers of a loaded checkpoint (with its directory handle when the browser gave one). */
function recentEntry(role: Role, summary: LoadedSummary, folder: PickedFolder): RecentCheckpoint {
  const { label, modelType, digest, bytes } = summary;
  return {
    role,
    label,
    modelType,
    digest,
    bytes,
    when: Date.now(),
    ...(folder.handle ? { handle: folder.handle } : {}),
  };
}

function isCancellation(e: unknown, message: string): boolean {
  return (e as Error)?.name === 'CancelledError' || message === 'Cancelled by the user.';
}

/** A drop zone for one role; `load` is called with each folder dropped or chosen. */
function createZone(role: Role, load: (folder: PickedFolder) => Promise<unknown>): Zone {
  const t = ROLE_TEXT[role];
  const input = el('input', {
    type: 'file',
    webkitdirectory: true,
    multiple: true,
    class: 'sr-only',
    tabindex: -1,
    'data-testid': `${role}-files`,
    'aria-label': `${t.title} folder`,
  });
  const choose = el(
    'button',
    { type: 'button', class: 'secondary', 'data-testid': `${role}-choose` },
    'Choose folder…',
  );
  const status = el('div', { class: 'zone-status', 'aria-live': 'polite' });
  const summaryBox = el('div', { 'data-testid': `${role}-summary-box` });
  const zone = el(
    'div',
    {
      class: 'zone',
      'data-role': role,
      'data-state': 'empty',
      'data-testid': `${role}-zone`,
      role: 'group',
      'aria-label': `${t.title} drop zone`,
    },
    el('h3', {}, t.title),
    el('p', { class: 'hint' }, t.hint),
    el('p', { class: 'hint', 'data-testid': `${role}-hub-hint` }, HUB_CACHE_HINT),
    el('div', { class: 'row tight' }, choose, input),
    status,
    summaryBox,
  );
  wireFolderInputs(zone, choose, input, load, showError);

  function showSummary(s: LoadedSummary | undefined) {
    clear(summaryBox);
    if (s) append(summaryBox, ...summaryNodes(role, s));
  }
  function showError(message: string) {
    clear(status);
    append(status, el('p', { class: 'error', role: 'alert', 'data-testid': `${role}-error` }, message));
  }
  // data-load-count changes each time a load of this zone settles (loaded, failed or cancelled): tests wait on it.
  // Changes made by the other zone's load (refresh, dropped) set the state without counting.
  let settled = 0;
  const setState = (s: string, counted = true) => {
    zone.setAttribute('data-state', s);
    if (s !== 'loading' && counted) zone.setAttribute('data-load-count', String(++settled));
  };

  let running: LoadProgress | undefined;
  return {
    showError,
    start(folder: PickedFolder, cancel: () => void) {
      setState('loading');
      clear(status);
      running = loadProgress(role, t.title, folder, cancel);
      append(status, ...running.nodes);
      choose.disabled = true;
    },
    progress(p: Progress) {
      running?.update(p);
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
      // the red zone alone would read as "nothing loaded", while the runs still use the previous checkpoint
      if (still)
        append(
          status,
          el(
            'p',
            { class: 'muted small', 'data-testid': `${role}-still-loaded` },
            `${still.label} (loaded before) is still loaded, and the runs use it.`,
          ),
        );
      showSummary(still);
    },
    refresh(s: LoadedSummary) {
      if (zone.getAttribute('data-state') === 'loading') return; // this zone's own load shows its result
      setState('loaded', false);
      showSummary(s);
    },
    dropped(message: string) {
      if (zone.getAttribute('data-state') === 'loading') return;
      setState('error', false);
      showError(message);
      showSummary(undefined);
    },
    setLocked(on: boolean) {
      if (zone.getAttribute('data-state') !== 'loading') choose.disabled = on;
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

/** The folder picker button and drag-and-drop on a zone; each folder read goes to `load`. */
function wireFolderInputs(
  zone: HTMLElement,
  choose: HTMLButtonElement,
  input: HTMLInputElement,
  load: (folder: PickedFolder) => Promise<unknown>,
  showError: (message: string) => void,
): void {
  choose.addEventListener('click', () => input.click());
  input.addEventListener('change', () => {
    if (input.files?.length) void load(fromFileList(input.files));
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
    void picked.then(
      (f) => load(f),
      (err: Error) => showError(`Could not read the dropped folder: ${err.message}`),
    );
  });
}

interface LoadProgress {
  nodes: HTMLElement[];
  update(p: Progress): void;
}

/** The progress bar, Cancel button and detail line of a running load. */
function loadProgress(role: Role, title: string, folder: PickedFolder, cancel: () => void): LoadProgress {
  const bar = el('progress', { max: 1, value: 0, 'aria-label': `${title} load progress` });
  const detail = el(
    'span',
    { class: 'small', 'data-testid': `${role}-progress` },
    `Opening ${folder.label} (${folder.files.length} files)…`,
  );
  const cancelBtn = el(
    'button',
    { type: 'button', class: 'secondary small-btn', 'data-testid': `${role}-cancel` },
    'Cancel',
  );
  cancelBtn.addEventListener('click', () => {
    cancelBtn.disabled = true;
    cancel();
  });
  return {
    nodes: [el('div', { class: 'progress-row' }, bar, cancelBtn), detail],
    update(p: Progress) {
      bar.max = Math.max(1, Number(p.total) || 1);
      bar.value = Math.min(bar.max, Number(p.done) || 0);
      detail.textContent =
        p.phase === 'upload' ? `Uploading to the GPU: ${p.detail ?? ''}` : `${p.phase}: ${p.detail ?? ''}`;
    },
  };
}

/** The loaded checkpoint's name and facts (type, geometry, quantization, size, digest, load time). */
function summaryNodes(role: Role, s: LoadedSummary): HTMLElement[] {
  // A split Qwen3.5 MTP drafter: one full-attention layer after fc, with its own full KV cache.
  const drafter = s.drafter !== undefined;
  const qwen = s.family === 'qwen3_5' && !drafter;
  const kv: [string, string][] = [
    ['Type', s.modelType],
    [
      'Layers',
      drafter
        ? '1 (fc, then one full-attention layer)'
        : qwen && s.layerKinds
          ? `${fmtInt(s.layers)}: ${s.layerKinds}`
          : fmtInt(s.layers),
    ],
    ['Hidden', fmtInt(s.hidden)],
    ['Heads', fmtInt(s.heads)],
    // Qwen3.5 has no sliding ring: Gated DeltaNet layers carry a recurrent state, full layers a linear KV cache.
    ['Window', drafter ? 'none (full KV cache)' : qwen ? 'none (recurrent state + full KV cache)' : fmtInt(s.window)],
    ['Vocab', fmtInt(s.vocab)],
    ['Quantization', s.quantization],
    [
      'Size',
      `${fmtBytes(s.bytes)} in ${fmtInt(s.tensors)} tensors${s.ignoredTensors ? ` (${fmtInt(s.ignoredTensors)} vision/audio ignored)` : ''}`,
    ],
    ['Digest', shortDigest(s.digest)],
    ['Loaded', `${fmtMs(s.loadMs)}${s.hasTokenizer ? ' · tokenizer found' : ''}`],
  ];
  if (qwen) kv.splice(1, 0, ['MTP', s.mtpHead ?? 'none: oracle drafts only']);
  if (s.experts) kv.splice(2, 0, ['Experts', s.experts]); // a Gemma 4 MoE target: after Type and Layers
  // A Gemma 4 E-series target (E2B / E4B) after Type and Layers; its assistant's centroid head after Type.
  if (s.kvShared) kv.splice(2, 0, ['KV sharing', s.kvShared]);
  if (s.perLayerInputs) kv.splice(2, 0, ['Per-layer inputs', s.perLayerInputs]);
  if (s.centroidHead) kv.splice(1, 0, ['LM head', `centroid: ${s.centroidHead}`]);
  if (s.drafter !== undefined) kv.splice(1, 0, ['Drafts', s.drafter]);
  const nodes: (HTMLElement | null)[] = [
    el('p', { class: 'loaded-name' }, el('strong', {}, s.label)),
    el(
      'dl',
      { class: 'kv compact', 'data-testid': `${role}-summary` },
      ...kv.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]),
    ),
    // Why a Qwen3.5 target cannot draft (no mtp.* tensors, an unsupported head), in the format layer's words.
    s.mtpUnavailable
      ? el('p', { class: 'small note', 'data-testid': `${role}-mtp-unavailable` }, s.mtpUnavailable)
      : null,
  ];
  return nodes.filter((n): n is HTMLElement => n !== null);
}

/** The "Recent checkpoints" list: each entry with Reopen when its directory handle was kept. */
function createRecentList(reopen: (r: RecentCheckpoint) => Promise<void>): {
  root: HTMLElement;
  render(list?: RecentCheckpoint[]): Promise<void>;
} {
  const root = el('ul', { class: 'recent', 'data-testid': 'recent' });
  async function render(list?: RecentCheckpoint[]) {
    const items = list ?? (await listRecent());
    clear(root);
    root.hidden = items.length === 0;
    for (const r of items) {
      const info = `${r.role} · ${r.modelType} · ${r.label} · ${fmtBytes(r.bytes)} · ${shortDigest(r.digest)}`;
      let action: HTMLElement;
      if (r.handle) {
        action = el('button', { type: 'button', class: 'link' }, 'Reopen');
        action.addEventListener('click', () => reopen(r));
      } else {
        action = el('span', { class: 'muted' }, 'drop again');
      }
      append(root, el('li', {}, el('span', {}, info), ' ', action));
    }
  }
  return { root, render };
}
