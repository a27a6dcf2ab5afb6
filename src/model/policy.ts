import type { AttentionMode } from './ops.ts';

/**
 * A numerics policy decides, per op, which kernel variant a forward uses. `exact` keeps every row's
 * arithmetic identical whatever M is; the inexact policies (parity lab) re-create known causes of
 * block-versus-chain divergence one at a time.
 */
export interface Policy {
  name: string;
  description: string;
  /** How a chain step / verify block of M rows reads a sliding ring. */
  slidingVerifyOrder(M: number): AttentionMode;
}

export const EXACT: Policy = {
  name: 'exact',
  description: 'Every row uses the same pipeline and reduction order whatever M is; verify reads the ring in classic physical order.',
  slidingVerifyOrder: () => 'physical',
};
