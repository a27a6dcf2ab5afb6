/** The format tests' one way to say "this input must be refused with a FormatError". */
import { expect } from 'vitest';
import { FormatError } from '../../src/format/errors.ts';

/** The FormatError a promise (or a function, called) must fail with; anything else fails the test. */
export async function formatError(p: Promise<unknown> | (() => unknown)): Promise<FormatError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    expect(e).toBeInstanceOf(FormatError);
    return e as FormatError;
  }
  throw new Error('expected a FormatError');
}

/** The message of that FormatError. */
export async function refusal(p: Promise<unknown> | (() => unknown)): Promise<string> {
  return (await formatError(p)).message;
}
