/**
 * Whether a checkpoint just opened may go on its zone beside the other zone's: its role, its family and the pair's
 * compatibility (src/format/compat.ts).
 */
import { checkCompatibility } from '../format/compat.ts';
import type { AssistantDescription, TargetDescription } from '../format/model-description.ts';
import type { FamilyCheckpoint } from '../format/open-target.ts';
import type { LoadedCheckpoint } from './loaded-checkpoint.ts';

/** The zone a checkpoint is dropped on: the target's, or the assistant's (a Gemma 4 assistant, a Qwen3.5 drafter). */
export type Role = 'target' | 'assistant';

/**
 * Throws where `opened` cannot take `role` beside `other` (the other zone's checkpoint); for a new target, returns
 * the message of an assistant it unloads (undefined: the assistant stays).
 */
export function checkPairing(
  role: Role,
  opened: FamilyCheckpoint,
  other: LoadedCheckpoint | undefined,
  folder: { label: string },
): string | undefined {
  // A new target replaces the pair's anchor: a loaded assistant that cannot draft for it is unloaded once the
  // target is up (with a message in its zone), not a reason to refuse the target. Refusing it left no way to go
  // from one pair to another of a different shape but a reload: each drop was refused for not fitting the other.
  let unloadAssistant: string | undefined;
  if (role === 'target' && opened.family === 'qwen3_5' && other?.family === 'gemma4')
    unloadAssistant = `"${other.ck.label}" was unloaded: a Gemma 4 MTP assistant cannot draft for the Qwen3.5 target "${folder.label}", which drafts with its own MTP head (mtp.*) or a split MTP drafter folder.`;
  if (opened.family === 'gemma4') {
    const ck = opened.checkpoint;
    const actual: Role = ck.description.role;
    if (actual !== role) {
      throw new Error(
        `${folder.label}: this is ${actual === 'target' ? 'a target model' : 'an MTP assistant'} (model_type "${ck.modelType}"), not ${role === 'target' ? 'a target' : 'an assistant'}. Drop it on the ${actual} zone.`,
      );
    }
    if (role === 'assistant' && other?.family === 'qwen3_5')
      throw new Error(
        `${folder.label}: a Gemma 4 MTP assistant (model_type "${ck.modelType}") cannot draft for the loaded Qwen3.5 target ${other.ck.label}, which drafts with its own MTP head (mtp.*) or a split MTP drafter folder; load a Gemma 4 target first.`,
      );
    if (other?.family === 'gemma4') {
      const [t, a] = role === 'target' ? [ck, other.ck] : [other.ck, ck];
      try {
        checkCompatibility(t.description as TargetDescription, a.description as AssistantDescription);
      } catch (e) {
        const why = (e as Error).message;
        if (role === 'target')
          unloadAssistant = `"${other.ck.label}" was unloaded: it does not fit the new target "${folder.label}" (${why}). Drop the assistant made for "${folder.label}".`;
        else
          throw new Error(
            `"${folder.label}" does not fit the loaded target "${other.ck.label}": ${why}. Drop the assistant made for "${other.ck.label}", or first drop the target "${folder.label}" was made for (a new target unloads an assistant that does not fit it).`,
          );
      }
    }
  }
  return unloadAssistant;
}
