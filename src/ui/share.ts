/**
 * The share bar of a report: PNG, JSON, Markdown and a link that carries the whole report in its
 * fragment. Clipboard writes can be refused (no permission, no focus); the link and the Markdown then
 * stay in a read-only field to copy by hand, so sharing never depends on the clipboard.
 */
import { el } from './dom.ts';
import { reportPng } from './png-export.ts';
import type { ReportSelection } from './report-view.ts';
import { encodeShareFragment, reportFileStem, reportMarkdown } from './share-codec.ts';

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

export function shareLink(sel: ReportSelection): string {
  return `${location.origin}${location.pathname}#${encodeShareFragment(sel.raw)}`;
}

export function createShareBar(current: () => ReportSelection | undefined): HTMLElement {
  const status = el('span', { class: 'small', 'aria-live': 'polite', 'data-testid': 'share-status' });
  const field = el('textarea', { class: 'share-field', readonly: true, rows: 2, 'aria-label': 'Shared text', 'data-testid': 'share-link', hidden: true });
  const button = (label: string, testid: string, act: (s: ReportSelection) => Promise<string> | string) => {
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
  const offer = async (text: string, what: string) => {
    field.value = text;
    field.hidden = false;
    if (await copy(text)) return `${what} copied to the clipboard.`;
    field.focus();
    field.select();
    return `The clipboard is not available here: ${what.toLowerCase()} is selected in the field below, copy it by hand.`;
  };
  return el('div', { class: 'share' },
    el('div', { class: 'row tight' },
      button('Download PNG', 'download-png', async (s) => {
        downloadBlob(await reportPng({ report: s.report, grid: s.grid, gridTitle: s.gridTitle }), `${reportFileStem(s.report)}.png`);
        return 'PNG downloaded.';
      }),
      button('Download JSON', 'download-json', (s) => {
        downloadBlob(new Blob([JSON.stringify(s.raw, null, 1)], { type: 'application/json' }), `${reportFileStem(s.report)}.json`);
        return 'JSON downloaded.';
      }),
      button('Copy Markdown', 'copy-markdown', (s) => {
        // A long draw with full localization makes a long link; past a chat-friendly size, leave it out.
        const link = shareLink(s);
        return offer(reportMarkdown(s.report, link.length <= 8000 ? link : undefined), 'Markdown summary');
      }),
      button('Copy share link', 'copy-link', (s) => offer(shareLink(s), 'Share link')),
      status),
    field);
}
