/**
 * The field readers that every family's config.json parser shares: a JSON object, where a value was
 * read from (the file and the key path, for messages that name both), and checked integers.
 */
import { FormatError } from './errors.ts';

export type Obj = Record<string, unknown>;
export const isObj = (x: unknown): x is Obj => typeof x === 'object' && x !== null && !Array.isArray(x);

/** Where values are read from: the file, and the key path before the key ("text_config."). */
export interface Ctx {
  file: string;
  where: string;
}

export function posInt(ctx: Ctx, o: Obj, key: string): number {
  const v = o[key];
  if (!Number.isSafeInteger(v) || (v as number) <= 0) {
    throw new FormatError(
      `${ctx.file}: ${ctx.where}${key} must be a positive integer, found ${v === undefined ? 'nothing' : JSON.stringify(v)}`,
      ctx.file,
      ctx.where + key,
    );
  }
  return v as number;
}

/** posInt, or undefined where the key is absent or null. */
export function optPosInt(ctx: Ctx, o: Obj, key: string): number | undefined {
  return o[key] === undefined || o[key] === null ? undefined : posInt(ctx, o, key);
}
