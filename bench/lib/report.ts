// Turns the raw results of all rounds into medians, the comparison table, and bench/RESULTS.md.
import { median, round } from './stats.js';

export type Json = number | string | boolean | null | Json[] | { [k: string]: Json };

/**
 * The median of several results of the same shape, leaf by leaf; lists (error messages) are counted instead,
 * summed over the results, so a table shows how many errors all the rounds had.
 */
export function medianOf(results: Json[]): Json {
  const first = results[0];
  if (typeof first === 'number') return round(median(results as number[]));
  if (Array.isArray(first)) return (results as Json[][]).reduce((a, r) => a + r.length, 0);
  if (first && typeof first === 'object') {
    return Object.fromEntries(Object.keys(first).map((k) => [k, medianOf(results.map((r) => (r as Record<string, Json>)[k] ?? null))]));
  }
  return first ?? null;
}

export function pick(value: Json | undefined, path: string): number | undefined {
  let v: Json | undefined = value;
  for (const key of path.split('.')) v = v && typeof v === 'object' && !Array.isArray(v) ? v[key] : undefined;
  return typeof v === 'number' ? v : undefined;
}

export interface Row {
  metric: string;
  /** bench name in the summaries. */
  bench: string;
  path: string;
  /** Divides the stored number for display (KiB to MiB...). */
  scale?: number;
}

const fmt = (n: number | undefined) => n === undefined || !Number.isFinite(n) ? '–' : n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2);
const ratio = (a: number | undefined, b: number | undefined) => a === undefined || b === undefined || !b ? '–' : `${(a / b).toFixed(2)}x`;

/** summaries[bench][target] = median result. */
export function table(rows: Row[], summaries: Record<string, Record<string, Json>>): string {
  const lines = [
    '| metric | minicri | containerd | floor | minicri / containerd | minicri / floor |',
    '|---|--:|--:|--:|--:|--:|',
  ];
  for (const r of rows) {
    const get = (target: string) => {
      const v = pick(summaries[r.bench]?.[target], r.path);
      return v === undefined ? undefined : v / (r.scale ?? 1);
    };
    const [m, c, f] = [get('minicri'), get('containerd'), get('floor')];
    lines.push(`| ${r.metric} | ${fmt(m)} | ${fmt(c)} | ${fmt(f)} | ${ratio(m, c)} | ${ratio(m, f)} |`);
  }
  return lines.join('\n');
}
