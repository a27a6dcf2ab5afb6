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

/**
 * A positive finite number, or `fallback` where the key is absent or null. Used for rms_norm_eps: a value of 0 or
 * below (or a string) is no epsilon the model was trained with, and a negative one makes every RMSNorm of a zero
 * row divide by the root of a negative number (NaN logits), so it is refused rather than read or replaced.
 */
export function optPosNumber(ctx: Ctx, o: Obj, key: string, fallback: number): number {
  const v = o[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
    throw new FormatError(
      `${ctx.file}: ${ctx.where}${key} must be a positive number, found ${JSON.stringify(v)}`,
      ctx.file,
      ctx.where + key,
    );
  return v;
}

/**
 * eos_token_id: one token id or a non-empty list of them, each a non-negative integer; undefined where the key is
 * absent or null (the caller's next source or default applies). A malformed value is refused, not skipped: skipping
 * it would stop generation on the default ids instead of the ones the config meant, without a word. An id at or past
 * the vocabulary is kept, as mlx-lm and transformers keep it (it never matches a generated token): refusing it would
 * refuse checkpoints those servers run.
 */
export function optEosIds(ctx: Ctx, o: Obj, key: string): number[] | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  const ids = Array.isArray(v) ? v : [v];
  const ok = (x: unknown) => Number.isSafeInteger(x) && (x as number) >= 0;
  if (ids.length === 0 || !ids.every(ok))
    throw new FormatError(
      `${ctx.file}: ${ctx.where}${key} must be a token id or a non-empty list of token ids (non-negative integers), found ${JSON.stringify(v)}`,
      ctx.file,
      ctx.where + key,
    );
  return [...new Set(ids as number[])];
}
