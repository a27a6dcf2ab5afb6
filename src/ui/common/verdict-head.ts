import { el } from './dom.ts';

/** A verdict label's colour: agreement, disagreement, or neither (a trace comparison that differs only where undecided). */
export type VerdictTone = 'equal' | 'diverges' | 'undecided';

/**
 * The head of every verdict card (probe, trace, generation, Compare): the label in its tone, then the lines that
 * say what it means (null lines are left out).
 */
export function verdictHead(tone: VerdictTone, label: string, ...lines: (HTMLElement | null)[]): HTMLElement {
  return el(
    'div',
    { class: 'verdict-head' },
    el('span', { class: `verdict-label ${tone}` }, label),
    el('div', {}, ...lines),
  );
}
