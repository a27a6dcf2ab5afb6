/**
 * The one error type of the format layer. Every refusal (bad file, unsupported model variant, missing
 * tensor) is a FormatError so that callers (UI, CLI) can show the message as is to the user: messages
 * always name the file, the tensor or key, and what was expected versus found.
 */
export class FormatError extends Error {
  override readonly name = 'FormatError';
  constructor(
    message: string,
    /** The file the problem is in, when there is one (path relative to the checkpoint folder). */
    readonly file?: string,
    /** The tensor or config key concerned, when there is one. */
    readonly subject?: string,
  ) {
    super(message);
  }
}

/** Formats a shape the way messages show it: [4,8]. */
export function fmtShape(shape: readonly number[]): string {
  return `[${shape.join(',')}]`;
}
