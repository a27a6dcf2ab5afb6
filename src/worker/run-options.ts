/**
 * Checks of the run options the page sends the worker: the worker is where they enter, as the CLI's option
 * parsing is for a command line, so the layers below take them as checked.
 */
import { MAX_VERIFY_BLOCK } from '../model/target.ts';

/** A verify block width K: a probe or trace takes 1 (the chain itself), a generation at least 2 (one draft). */
export function checkBlockOption(block: number, min: 1 | 2): void {
  if (!(Number.isInteger(block) && block >= min && block <= MAX_VERIFY_BLOCK))
    throw new Error(`block width K must be a whole number from ${min} to ${MAX_VERIFY_BLOCK} (got ${block})`);
}
