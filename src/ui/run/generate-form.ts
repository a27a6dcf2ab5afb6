/**
 * Free generation, classic versus MTP: the prompt (token ids, or text when the target folder has a
 * tokenizer.json), max new tokens, K, policy, precision and the drafter's position convention; Run hands
 * the engine's result to `onResult` (the generation view).
 */
import type { EngineProxy } from '../common/engine-client.ts';
import type { LoadedSummary } from '../../worker/engine.ts';
import { el } from '../common/dom.ts';
import { parseTokenIds } from '../common/format.ts';
import { blockSelect, policyField, precisionField, wholeNumber, type PolicyInfo } from './form-fields.ts';
import type { JobRunner } from './job-runner.ts';
import { generationPhases } from './phase-times.ts';
import { loadFormSettings, saveFormSettings, type GenerateSettings } from '../common/recent.ts';
import type { GenerationOptions, GenerationRun } from '../generation/generation-model.ts';

/** `<bos><|turn>` and a few ordinary ids: valid for any Gemma vocabulary (tiny-a's 1,024, the demo's 4,096). */
export const DEFAULT_PROMPT_IDS = '2, 105, 17, 42, 256';

/** The form's fields and its layout, Run and the progress below them. */
function generateControls(job: JobRunner) {
  const prompt = el('textarea', {
    rows: 2,
    cols: 48,
    class: 'prompt',
    'data-testid': 'generate-prompt',
    'aria-label': 'Prompt',
    spellcheck: false,
  });
  prompt.value = DEFAULT_PROMPT_IDS;
  const asIds = el('input', {
    type: 'radio',
    name: 'generate-prompt-mode',
    value: 'ids',
    checked: true,
    'data-testid': 'generate-prompt-ids',
  });
  const asText = el('input', {
    type: 'radio',
    name: 'generate-prompt-mode',
    value: 'text',
    disabled: true,
    'data-testid': 'generate-prompt-text',
  });
  const chat = el('input', { type: 'checkbox', disabled: true, 'data-testid': 'generate-chat' });
  const maxNew = el('input', {
    type: 'number',
    min: 1,
    max: 4096,
    step: 1,
    size: 5,
    value: 32,
    'data-testid': 'generate-max-new',
  });
  const block = blockSelect('generate-block');
  const policy = policyField('generate-policy');
  const precision = precisionField('generate-precision', 'generate-precision');
  const draftPosition = el(
    'select',
    { 'data-testid': 'generate-draft-position' },
    el('option', { value: 'hf' }, 'hf'),
    el('option', { value: 'mlxcel' }, 'mlxcel'),
  );
  // Qwen3.5 targets draft with their own MTP head or a split drafter's (on the assistant zone), or (without one, or by
  // choice) with oracle drafts.
  const headOption = el('option', { value: 'mtp', 'data-testid': 'generate-drafts-head' }, "target's own MTP head");
  const drafts = el(
    'select',
    { 'data-testid': 'generate-drafts' },
    headOption,
    el('option', { value: 'oracle' }, 'oracle (classic output, a third wrong)'),
  );
  const draftsLabel = el('label', { hidden: true }, 'Drafts ', drafts);
  const draftsNote = el('p', { class: 'small note', 'data-testid': 'generate-drafts-note', hidden: true });
  const positionLabel = el('label', {}, 'Draft position ', draftPosition);
  const about = el('p', { class: 'small muted', 'data-testid': 'generate-about' });
  const tokenizerNote = el('span', { class: 'small muted', 'data-testid': 'generate-tokenizer-note' });
  const root = el(
    'div',
    {},
    el(
      'div',
      { class: 'settings' },
      el(
        'fieldset',
        { class: 'inline' },
        el('legend', {}, 'Prompt as'),
        el('label', {}, asIds, ' token ids'),
        el('label', {}, asText, ' text'),
        el('label', {}, chat, ' chat template'),
      ),
      tokenizerNote,
    ),
    el('div', { class: 'settings prompt-row' }, prompt),
    el(
      'div',
      { class: 'settings' },
      el('label', {}, 'Max new tokens ', maxNew),
      el('label', {}, 'Block width K ', block),
      el('label', {}, 'Policy ', policy.select),
      precision.root,
      positionLabel,
      draftsLabel,
    ),
    draftsNote,
    about,
    policy.help,
    policy.chips,
    job.controls,
    job.phases,
    job.message,
  );
  return {
    root,
    prompt,
    asIds,
    asText,
    chat,
    maxNew,
    block,
    policy,
    precision,
    draftPosition,
    headOption,
    drafts,
    draftsLabel,
    draftsNote,
    positionLabel,
    about,
    tokenizerNote,
  };
}

type GenerateControls = ReturnType<typeof generateControls>;

/** Run: reads the options (or says what is wrong with them), keeps them for the next visit and runs the generation. */
async function runGenerate(
  c: GenerateControls,
  engine: EngineProxy,
  job: JobRunner,
  state: { vocab: number; hasTokenizer: boolean; qwen: boolean },
  onResult: (r: GenerationRun) => void,
  syncMode: () => void,
): Promise<void> {
  const { prompt, asIds, asText, chat, maxNew, block, policy, precision, draftPosition, drafts } = c;
  const { vocab, hasTokenizer, qwen } = state;
  let options: GenerationOptions;
  try {
    const text = asText.checked && hasTokenizer;
    if (text && !prompt.value.trim()) throw new Error('Write a prompt first.');
    options = {
      prompt: text ? prompt.value : parseTokenIds(prompt.value, vocab),
      chat: text && chat.checked,
      maxNew: wholeNumber(maxNew.value, 'Max new tokens', 1, 4096),
      block: Number(block.value),
      policy: policy.select.value,
      precision: precision.value(),
      draftPosition: draftPosition.value === 'mlxcel' ? 'mlxcel' : 'hf',
      ...(qwen ? { drafts: drafts.value === 'oracle' ? ('oracle' as const) : ('mtp' as const) } : {}),
    };
  } catch (e) {
    job.message.replaceChildren();
    job.error((e as Error).message);
    prompt.focus();
    return;
  }
  void saveFormSettings<GenerateSettings>('generate', {
    prompt: prompt.value,
    promptMode: asText.checked ? 'text' : 'ids',
    chat: chat.checked,
    maxNew: options.maxNew,
    block: options.block,
    policy: options.policy,
    precision: options.precision,
    draftPosition: options.draftPosition,
  });
  const result = await job.start(
    (jobId, onProgress) => engine.runGeneration(options, jobId, onProgress),
    [prompt, asIds, asText, chat, maxNew, block, policy.select, precision.f32, precision.bf16, draftPosition, drafts],
    generationPhases,
  );
  // "done in" on the card is the run panel's "Done in": one clock for both
  if (result) onResult({ options, result, createdAt: new Date().toISOString(), elapsedMs: job.elapsedMs() });
  syncMode();
}

export function createGenerateForm(
  engine: EngineProxy,
  job: JobRunner,
  onResult: (r: GenerationRun) => void,
): {
  root: HTMLElement;
  policies(list: PolicyInfo[]): void;
  setModels(target: LoadedSummary | undefined, assistant: LoadedSummary | undefined): void;
  /** Puts a text prompt in the box (the demo model's), now or once a target with a tokenizer.json is loaded. */
  suggest(text: string, chat: boolean): void;
} {
  const c = generateControls(job);
  const {
    root,
    prompt,
    asIds,
    asText,
    chat,
    maxNew,
    block,
    policy,
    precision,
    draftPosition,
    headOption,
    drafts,
    draftsLabel,
    draftsNote,
    positionLabel,
    about,
    tokenizerNote,
  } = c;

  let vocab = NaN;
  let hasTokenizer = false;
  let qwen = false;
  let draftsFor: string | undefined;
  /** What the form says about drafting for the loaded target's family, and the Qwen3.5 drafts choice. */
  const syncDrafts = (target: LoadedSummary | undefined) => {
    qwen = target?.family === 'qwen3_5';
    draftsLabel.hidden = !qwen;
    positionLabel.hidden = qwen;
    // A new Qwen3.5 target, or a new head for it (a split drafter attached or dropped), starts on the head when it has
    // one, on oracle drafts when it has none.
    const key = qwen && target ? `${target.digest} ${target.mtpHead ?? ''}` : undefined;
    if (qwen && target && key !== draftsFor) drafts.value = target.mtpHead ? 'mtp' : 'oracle';
    draftsFor = key;
    headOption.textContent = target?.mtpDrafter ? `split MTP drafter ${target.mtpDrafter}` : "target's own MTP head";
    draftsNote.hidden = !(qwen && target?.mtpUnavailable);
    draftsNote.textContent =
      qwen && target?.mtpUnavailable
        ? `${target.mtpUnavailable}. Oracle drafts run MTP generation without the head.`
        : '';
    about.textContent = qwen
      ? "Greedy decode twice: classic (one token per forward), then MTP: the MTP head (the target's own mtp.*, or a split drafter folder's on the assistant zone) drafts K − 1 tokens from its post-norm hidden state, one verify forward of K rows accepts the longest matching prefix and rolls the recurrent state back to it. Oracle drafts replay the classic output with a fixed third of the drafts wrong."
      : 'Greedy decode twice: classic (one token per forward), then MTP (the assistant drafts K − 1 tokens, one verify forward of K rows accepts the longest matching prefix). ' +
        'Draft position: "hf" lets the drafter see W + 1 keys (the ring\'s evicted entry, as transformers), "mlxcel" W keys.';
  };
  syncDrafts(undefined);
  let suggestion: { text: string; chat: boolean } | undefined;
  const applySuggestion = () => {
    if (!suggestion || !hasTokenizer) return;
    prompt.value = suggestion.text;
    asText.checked = true;
    chat.checked = suggestion.chat;
    suggestion = undefined;
  };
  const syncMode = () => {
    asText.disabled = !hasTokenizer;
    if (!hasTokenizer) asIds.checked = true;
    chat.disabled = !asText.checked;
    prompt.placeholder = asText.checked ? 'Why is the sky blue?' : DEFAULT_PROMPT_IDS;
  };
  asIds.addEventListener('change', syncMode);
  asText.addEventListener('change', syncMode);

  let saved: Partial<GenerateSettings> | undefined;
  const restored = loadFormSettings<GenerateSettings>('generate').then((s) => {
    saved = s;
    if (!s) return;
    if (typeof s.prompt === 'string' && s.prompt.trim()) prompt.value = s.prompt;
    if (s.promptMode === 'text') asText.checked = true;
    chat.checked = s.chat === true;
    if (typeof s.maxNew === 'number') maxNew.value = String(s.maxNew);
    if (typeof s.block === 'number') block.value = String(s.block);
    precision.set(s.precision);
    if (s.draftPosition === 'mlxcel' || s.draftPosition === 'hf') draftPosition.value = s.draftPosition;
    policy.set(s.policy);
    syncMode();
  });

  job.run.addEventListener('click', () =>
    runGenerate(c, engine, job, { vocab, hasTokenizer, qwen }, onResult, syncMode),
  );

  return {
    root,
    policies(list) {
      policy.fill(list);
      void restored.then(() => policy.set(saved?.policy));
    },
    setModels(target) {
      syncDrafts(target);
      vocab = target?.vocab ?? NaN;
      hasTokenizer = target?.hasTokenizer === true;
      tokenizerNote.textContent = !target
        ? ''
        : hasTokenizer
          ? 'The target has a tokenizer.json: text prompts work.'
          : `${target.label} has no tokenizer.json: token ids only.`;
      applySuggestion();
      syncMode();
    },
    suggest(text, chatForm) {
      suggestion = { text, chat: chatForm };
      applySuggestion();
      syncMode();
    },
  };
}
