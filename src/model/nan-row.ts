/**
 * The argmax of a logits row that holds a NaN (argmax.wgsl NAN_ROW, passed through by centroid_head.wgsl `pick`).
 * No token can be chosen from such a row: a checkpoint with a NaN weight (a norm, a scale) or a config that makes
 * the forward non-finite gives NaN in every row, where an argmax in which "NaN never wins" would emit token 0 and
 * the probe would compare NaN bytes as equal and pass. Every place that reads argmax ids back refuses this id by
 * name.
 */
export const NAN_ROW_ID = 0xfffffffe;

/** Thrown where an argmax id read back is NAN_ROW_ID. */
export class NonFiniteLogitsError extends Error {
  override readonly name = 'NonFiniteLogitsError';
}

/**
 * Refuses ids that hold NAN_ROW_ID. `what` names the logits ("the target's logits", "the MTP assistant's draft
 * logits"); row i of `ids` is the forward's row i.
 */
export function refuseNanRows(ids: ArrayLike<number>, what: string): void {
  for (let i = 0; i < ids.length; i++)
    if (ids[i] === NAN_ROW_ID)
      throw new NonFiniteLogitsError(
        `${what} hold NaN (row ${i} of ${ids.length} of this forward), so no token can be chosen: the forward is not ` +
          'finite. Check the checkpoint for NaN weights (norms, scales, biases) and its config.json (e.g. a ' +
          'non-positive rms_norm_eps).',
      );
}
