/**
 * The share bar of a report (probe or trace): PNG, JSON, Markdown and a link that carries the whole
 * report in its fragment (share-link.ts decides whether it fits). Clipboard writes can be refused (no
 * permission, no focus); the link and the Markdown then stay in a read-only field to copy by hand, so
 * sharing never depends on the clipboard. The buttons sit in the report's header; the status line and
 * the field get a full-width row of their own under it.
 */
import { el } from '../common/dom.ts';
import { fmtInt } from '../common/format.ts';
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

/** The line a Markdown summary ends with when its report is too large for a link in it. */
export function markdownWithoutLink(size: string): string {
  return `\n_The full report is too large for a link here (${size}): ask for its JSON file, which opens in Ringside with "Open a report (JSON)"._\n`;
}

/** `testPrefix` starts every test id of the bar (the report card's bar has none; another card's names itself). */
export function createShareBar(
  current: () => Shareable | undefined,
  o: { testPrefix: string } = { testPrefix: '' },
): {
  buttons: HTMLElement;
  output: HTMLElement;
  reset(): void;
} {
  const status = el('p', {
    class: 'small share-status',
    'aria-live': 'polite',
    'data-testid': `${o.testPrefix}share-status`,
  });
  const field = el('textarea', {
    class: 'share-field',
    readonly: true,
    rows: 3,
    'aria-label': 'Shared text',
    'data-testid': `${o.testPrefix}share-link`,
    hidden: true,
  });
  const output = el('div', { class: 'share-out' }, status, field);
  const downloadJson = (s: Shareable) =>
    downloadBlob(new Blob([JSON.stringify(s.raw, null, 1)], { type: 'application/json' }), `${s.stem}.json`);
  type Said = string | { text: string; offerJson: Shareable };
  const button = (label: string, testid: string, act: (s: Shareable) => Promise<Said> | Said) => {
    const b = el('button', { type: 'button', class: 'secondary', 'data-testid': `${o.testPrefix}${testid}` }, label);
    b.addEventListener('click', async () => {
      const s = current();
      if (!s) return;
      b.disabled = true;
      try {
        const said = await act(s);
        if (typeof said === 'string') status.textContent = said;
        else {
          // The status names what was left out and offers the file that carries everything.
          const offer = el(
            'button',
            { type: 'button', class: 'link', 'data-testid': `${o.testPrefix}markdown-json-offer` },
            'Download the JSON',
          );
          offer.addEventListener('click', () => {
            downloadJson(said.offerJson);
            status.textContent = 'JSON downloaded.';
          });
          status.replaceChildren(said.text, ' ', offer);
        }
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
      downloadJson(s);
      return 'JSON downloaded.';
    }),
    button('Copy Markdown', 'copy-markdown', async (s) => {
      // A long draw with full localization makes a long link; past a chat-friendly size (even compacted), the summary
      // goes without it, says so in its own text, and the status offers the JSON file that carries everything.
      const link = shareLink(s.raw, MARKDOWN_LINK_CHARS);
      if (link.ok) return offer(s.markdown(link.link), 'Markdown summary');
      const size = `${fmtInt(link.chars)} characters`;
      const said = await offer(`${s.markdown(undefined)}${markdownWithoutLink(size)}`, 'Markdown summary');
      return {
        text: `${said} It has no link to the full report: the link would be ${size}, and a summary carries links up to ${fmtInt(MARKDOWN_LINK_CHARS)} (chat tools and issue trackers cut longer ones). Share the JSON file with it instead:`,
        offerJson: s,
      };
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
