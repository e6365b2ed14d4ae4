// CNI spec versions minicri speaks, and comparisons between them.

/** Versions whose configs we accept and whose results we parse. */
export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;

export function isSupportedVersion(v: unknown): v is string {
  return typeof v === 'string' && (SUPPORTED_VERSIONS as readonly string[]).includes(v);
}

/** Orders "x.y.z" version strings numerically; anything unparsable sorts lowest. */
export function compareVersions(a: string, b: string): number {
  const pa = parts(a);
  const pb = parts(b);
  for (let i = 0; i < 3; i++) {
    if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  }
  return 0;
}

export function versionAtLeast(v: string, min: string): boolean {
  return compareVersions(v, min) >= 0;
}

function parts(v: string): number[] {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(v);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : [-1, -1, -1];
}
