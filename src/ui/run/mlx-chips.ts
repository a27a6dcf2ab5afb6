/**
 * Beside a policy menu: which mlx-* policy stands for the user's Mac (the chip table of
 * src/model/mlx-policies.ts), and why mlx-metal differs from them. Shown only while the menu offers an
 * mlx-* policy (a Qwen3.5 target's menu has none).
 */
import { el } from '../common/dom.ts';
import { MLX_CHIP_NOTE, MLX_CHIP_TABLE, MLX_METAL_NOTE } from '../../model/mlx-policies.ts';

export function mlxChipTable(testid: string): { root: HTMLDetailsElement; show(names: string[]): void } {
  const td = (text: string) => el('td', {}, text);
  const table = el(
    'table',
    { class: 'data chip-table', 'data-testid': `${testid}-table` },
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        el('th', { scope: 'col' }, 'Mac'),
        el('th', { scope: 'col' }, 'architecture'),
        el('th', { scope: 'col' }, 'policy'),
      ),
    ),
    el('tbody', {}, ...MLX_CHIP_TABLE.map((r) => el('tr', {}, td(r.chips), td(r.architecture), td(r.policy)))),
  );
  const root = el(
    'details',
    { class: 'mlx-chips small', 'data-testid': testid },
    el('summary', {}, 'Which mlx-* policy is my Mac?'),
    el(
      'p',
      {},
      "MLX picks its quantized-matmul kernels by the GPU's architecture name (",
      el('code', {}, 'mx.device_info()["architecture"]'),
      ' in Python prints it):',
    ),
    el('div', { class: 'table-wrap' }, table),
    el('p', {}, MLX_CHIP_NOTE),
    el('p', { 'data-testid': `${testid}-metal` }, MLX_METAL_NOTE),
  );
  return {
    root,
    show(names) {
      root.hidden = !names.some((n) => MLX_CHIP_TABLE.some((r) => r.policy === n));
    },
  };
}
