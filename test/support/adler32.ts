// Adler-32 (RFC 1950), for checking zlib dictionary ids in tests.
export function adler32Of(b: Buffer): number {
  let a = 1;
  let s = 0;
  for (const byte of b) {
    a = (a + byte) % 65521;
    s = (s + a) % 65521;
  }
  return ((s << 16) | a) >>> 0;
}
