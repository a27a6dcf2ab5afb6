/**
 * Settings fields the run forms share: block width K, numerics policy with its description (and, while the
 * menu offers MLX's per-chip policies, which one is which Mac), precision.
 */
import { append, clear, el } from '../common/dom.ts';
import { mlxChipTable } from './mlx-chips.ts';

export type PolicyInfo = { name: string; description: string };

export function blockSelect(testid: string, def = 4): HTMLSelectElement {
  return el(
    'select',
    { 'data-testid': testid },
    ...[2, 3, 4, 5, 6, 7, 8].map((k) => el('option', { value: k, selected: k === def }, String(k))),
  );
}

export interface PolicyField {
  select: HTMLSelectElement;
  help: HTMLElement;
  /** The chip table of the mlx-* policies (hidden while the menu has none); test id `<testid>-chips`. */
  chips: HTMLElement;
  fill(list: PolicyInfo[]): void;
  /** Selects `name` if it is a known policy. */
  set(name: string | undefined): void;
}

export function policyField(testid: string): PolicyField {
  const select = el('select', { 'data-testid': testid }, el('option', { value: 'exact' }, 'exact'));
  const help = el('p', { class: 'small muted policy-help', 'data-testid': `${testid}-help` });
  const chips = mlxChipTable(`${testid}-chips`);
  chips.show([]);
  const descriptions = new Map<string, string>();
  const show = () => (help.textContent = descriptions.get(select.value) ?? '');
  select.addEventListener('change', show);
  return {
    select,
    help,
    chips: chips.root,
    fill(list) {
      const keep = select.value;
      clear(select);
      descriptions.clear();
      for (const p of list) {
        descriptions.set(p.name, p.description);
        append(select, el('option', { value: p.name }, p.name));
      }
      chips.show(list.map((p) => p.name));
      if (descriptions.has(keep)) select.value = keep;
      show();
    },
    set(name) {
      if (name && [...select.options].some((o) => o.value === name)) select.value = name;
      show();
    },
  };
}

export interface PrecisionField {
  root: HTMLElement;
  f32: HTMLInputElement;
  bf16: HTMLInputElement;
  value(): 'f32' | 'bf16';
  set(v: unknown): void;
}

/** Two radios named `name`; test ids `<prefix>-f32` and `<prefix>-bf16`. */
export function precisionField(name: string, prefix: string): PrecisionField {
  const f32 = el('input', { type: 'radio', name, value: 'f32', checked: true, 'data-testid': `${prefix}-f32` });
  const bf16 = el('input', { type: 'radio', name, value: 'bf16', 'data-testid': `${prefix}-bf16` });
  return {
    root: el(
      'fieldset',
      { class: 'inline' },
      el('legend', {}, 'Precision'),
      el('label', {}, f32, ' f32'),
      el('label', {}, bf16, ' bf16'),
    ),
    f32,
    bf16,
    value: () => (bf16.checked ? 'bf16' : 'f32'),
    set(v) {
      (v === 'bf16' ? bf16 : f32).checked = true;
    },
  };
}

/** A whole number in [min, max] from a field, or an Error that names the field. */
export function wholeNumber(text: string, what: string, min: number, max: number): number {
  const n = Number(text.trim());
  if (text.trim() === '' || !Number.isInteger(n) || n < min || n > max)
    throw new Error(`${what} must be a whole number from ${min} to ${max} (not ${JSON.stringify(text.trim())}).`);
  return n;
}
