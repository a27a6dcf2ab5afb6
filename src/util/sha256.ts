/** SHA-256 (hex) of bytes with WebCrypto, available in browsers, Workers and Node 20. */
export async function sha256Hex(data: ArrayBufferView): Promise<string> {
  const bytes = new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}
