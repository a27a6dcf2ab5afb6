/** A run's JSON file from the run list: the document as received, under the name its card's share bar gives it. */
import { generationFileStem } from '../generation/generation-model.ts';
import { reportFileStem, traceFileStem } from '../share/share-codec.ts';
import { downloadBlob } from '../share/share.ts';
import type { RunDocument } from './run-store.ts';

export function runFileStem(doc: RunDocument): string {
  return doc.kind === 'probe'
    ? reportFileStem(doc.report)
    : doc.kind === 'trace'
      ? traceFileStem(doc.report)
      : generationFileStem(doc.run);
}

export function downloadJson(raw: unknown, stem: string): void {
  downloadBlob(new Blob([JSON.stringify(raw, null, 1)], { type: 'application/json' }), `${stem}.json`);
}
