/** Canvas sizing shared by the charts: CSS size in pixels, backing store in device pixels. */
export const FONT = 'system-ui, -apple-system, "Segoe UI", sans-serif';

/** Sizes `canvas` to `w` x `h` CSS pixels at `scale` device pixels each; returns a context drawing in CSS pixels. */
export function sizeCanvas(
  canvas: HTMLCanvasElement,
  w: number,
  h: number,
  scale = window.devicePixelRatio || 1,
): CanvasRenderingContext2D | null {
  canvas.width = Math.max(1, Math.round(w * scale));
  canvas.height = Math.max(1, Math.round(h * scale));
  canvas.style.width = `${w}px`;
  canvas.style.height = `${h}px`;
  const ctx = canvas.getContext('2d');
  if (!ctx) return null;
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  ctx.clearRect(0, 0, w, h);
  return ctx;
}

/** Calls `paint` now and whenever the element's width changes (not its height, which painting changes). */
export function onWidthChange(node: HTMLElement, paint: () => void): void {
  let last = -1;
  new ResizeObserver(() => {
    if (node.clientWidth !== last) {
      last = node.clientWidth;
      paint();
    }
  }).observe(node);
}
