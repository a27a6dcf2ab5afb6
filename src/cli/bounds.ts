/**
 * The bounds of the CLI's numbers, in two stages. The options' own ranges are checked when they are read, before
 * any file is opened or GPU buffer made: a typo such as `--prefix 999999999999` must end in one line naming the
 * option, not in a JavaScript "Invalid array length" or a stream of Dawn validation errors. The model's own limit,
 * max_position_embeddings, is checked once its config.json is read, before any upload.
 */

/**
 * The most positions (tokens in one sequence) any option may ask for: 2^20, four times the 262,144 of the largest
 * context among the families Ringside runs (the synth presets copy 131,072 for Gemma 4 and 262,144 for Qwen3.5 from
 * the published configs). Past this no model is asked: the option itself is wrong.
 */
export const MAX_POSITIONS = 1 << 20;

/** The largest vocabulary an option may name or a token id may index: 2^20, four times Gemma 4's 262,144. */
export const MAX_VOCAB = 1 << 20;

/** Most tokens one generation may emit (its positions are checked against the model's limit as well). */
export const MAX_NEW = 100_000;

/** Largest seed: the synthetic weights' generator takes a 32-bit seed. */
export const MAX_SEED = 2 ** 32 - 1;

/** Most layers a synthetic or benchmark model may have (the largest published Gemma 4 and Qwen3.5 have 60 to 64). */
export const MAX_LAYERS = 128;

/**
 * Refuses a run that would place tokens past the positions the model declares (max_position_embeddings).
 *
 * MLX itself does not check: mlx-lm computes RoPE for any offset (nn.RoPE with the cache offset) and runs on. Ringside
 * refuses instead, because a parity verdict or a generation there describes a model outside the positions it was
 * built for, and a pass there reads as a statement about the model when it is not (a 5,000-token probe of a 4,096-
 * position model once ran 54 s and passed without a word).
 *
 * `need` is the positions the run covers, `how` the sum that gives it in the options' words ("--lengths 5000 +
 * --block 4"), `label` the checkpoint's name for the message; `maxPositions` null (config.json omits the key) lets
 * every length through.
 */
export function checkPositions(need: number, how: string, maxPositions: number | null, label: string): void {
  if (maxPositions === null || need <= maxPositions) return;
  throw new Error(
    `${how} = ${need} positions, past the ${maxPositions} that ${label}/config.json declares (max_position_embeddings); Ringside refuses positions the model was not built for`,
  );
}
