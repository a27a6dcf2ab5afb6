/**
 * The share bar of a report (probe or trace): PNG, JSON, Markdown and a link that carries the whole
 * report in its fragment (share-link.ts decides whether it fits). Clipboard writes can be refused (no
 * permission, no focus); the link and the Markdown then stay in a read-only field to copy by hand, so
 * sharing never depends on the clipboard. The buttons sit in the report's header; the status line and
 * the field get a full-width row of their own under it.
 */
import { el } from '../common/dom.ts';
import { buildShareLink, type LinkResult } from './share-link.ts';

/** What a report view hands the share bar. */
export interface Shareable {
  /** The report as received (validated): what JSON export and share links pass on, unknown fields included. */
  raw: unknown;
  /** File name without extension, safe characters only. */
  stem: string;
  png(): Promise<Blob>;
  markdown(link: string | undefined): string;
}

/** Longest link a Markdown summary carries (chat tools and issue trackers cut longer ones). */
export const MARKDOWN_LINK_CHARS = 8000;

export function downloadBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = el('a', { href: url, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
  // Revoke later: some browsers start the download after the click handler returns.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

async function copy(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

export function shareLink(raw: unknown, max?: number): LinkResult {
  return buildShareLink(raw, `${location.origin}${location.pathname}`, max);
}

export function createShareBar(current: () => Shareable | undefined): {
  buttons: HTMLElement;
  output: HTMLElement;
  reset(): void;
} {
  const status = el('p', { class: 'small share-status', 'aria-live': 'polite', 'data-testid': 'share-status' });
  const field = el('textarea', {
    class: 'share-field',
    readonly: true,
    rows: 3,
    'aria-label': 'Shared text',
    'data-testid': 'share-link',
    hidden: true,
  });
  const output = el('div', { class: 'share-out' }, status, field);
  const button = (label: string, testid: string, act: (s: Shareable) => Promise<string> | string) => {
    const b = el('button', { type: 'button', class: 'secondary', 'data-testid': testid }, label);
    b.addEventListener('click', async () => {
      const s = current();
      if (!s) return;
      b.disabled = true;
      try {
        status.textContent = await act(s);
      } catch (e) {
        status.textContent = `${label} failed: ${(e as Error).message}`;
      } finally {
        b.disabled = false;
      }
    });
    return b;
  };
  const offer = async (text: string, what: string, note = '') => {
    field.value = text;
    field.hidden = false;
    if (await copy(text)) return `${what} copied to the clipboard.${note}`;
    field.focus();
    field.select();
    return `The clipboard is not available here: ${what.toLowerCase()} is selected in the field below, copy it by hand.${note}`;
  };
  const compactNote =
    ' The report was too large for a full link: the link carries a compacted copy (top-k lists cut, numbers rounded to 7 digits); the JSON file has everything.';
  const buttons = el(
    'div',
    { class: 'share row tight' },
    button('Download PNG', 'download-png', async (s) => {
      downloadBlob(await s.png(), `${s.stem}.png`);
      return 'PNG downloaded.';
    }),
    button('Download JSON', 'download-json', (s) => {
      downloadBlob(new Blob([JSON.stringify(s.raw, null, 1)], { type: 'application/json' }), `${s.stem}.json`);
      return 'JSON downloaded.';
    }),
    button('Copy Markdown', 'copy-markdown', (s) => {
      // A long draw with full localization makes a long link; past a chat-friendly size (even compacted), leave it out.
      const link = shareLink(s.raw, MARKDOWN_LINK_CHARS);
      return offer(s.markdown(link.ok ? link.link : undefined), 'Markdown summary');
    }),
    button('Copy share link', 'copy-link', (s) => {
      const link = shareLink(s.raw);
      if (!link.ok) {
        field.hidden = true;
        return link.message;
      }
      return offer(link.link, 'Share link', link.compacted ? compactNote : '');
    }),
  );
  return {
    buttons,
    output,
    reset() {
      status.textContent = '';
      field.value = '';
      field.hidden = true;
    },
  };
}
