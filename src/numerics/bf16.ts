/** Round an f32 to bf16, ties to even (as common.wgsl round_bf16; NaN untouched). */
export function roundBf16(v: number): number {
  const u = new Uint32Array(new Float32Array([v]).buffer)[0];
  if ((u & 0x7fffffff) > 0x7f800000) return v;
  const r = (u + 0x7fff + ((u >>> 16) & 1)) & 0xffff0000;
  return new Float32Array(new Uint32Array([r >>> 0]).buffer)[0];
}
