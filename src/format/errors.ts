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

/**
 * Runs `open` (a checkpoint opener) and names the checkpoint in every FormatError it throws: "<label>: <message>".
 * The layers below (safetensors headers, config parsing, tensor descriptions) only know the file, and a bare
 * "config.json: ..." does not say which of two dropped folders (or --target and --draft) is wrong. Messages
 * that already start with the label (an opener that composes its own, e.g. "no config.json among ...") are left
 * as they are, so the label appears once.
 */
export async function namingCheckpoint<T>(label: string, open: () => Promise<T>): Promise<T> {
  try {
    return await open();
  } catch (e) {
    if (!(e instanceof FormatError) || e.message.startsWith(`${label}: `)) throw e;
    throw new FormatError(`${label}: ${e.message}`, e.file, e.subject);
  }
}
