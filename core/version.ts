// Dotted version numbers, parsed and ordered: CNI and CDI spec versions ("1.0.0", "v0.6.0") and kernel
// releases ("6.18.44-fc", of which the leading numbers count). Pure.

/** The dotted numbers `text` starts with (after an optional "v"), or undefined when it starts with none. */
export function parseVersion(text: string): number[] | undefined {
  const m = /^v?(\d+(?:\.\d+)*)/.exec(text);
  return m ? m[1]!.split('.').map(Number) : undefined;
}

/** Orders versions numerically, part by part ("0.10" after "0.4", a missing part is 0); an unparsable one sorts lowest. */
export function compareVersions(a: string, b: string): number {
  const pa = parseVersion(a);
  const pb = parseVersion(b);
  if (!pa || !pb) return (pa ? 1 : 0) - (pb ? 1 : 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** Whether `v` is `min` or later; an unparsable `v` is not. */
export function versionAtLeast(v: string, min: string): boolean {
  return parseVersion(v) !== undefined && compareVersions(v, min) >= 0;
}
