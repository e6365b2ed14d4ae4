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

/** Column titles of the targets, in table order: the reference right after minicri. */
export const COLUMNS: Record<string, string> = {
  minicri: 'minicri',
  containerd: 'containerd 2.1.5',
  'minicri-runc115': 'minicri, runc 1.1.5',
  containerd16: 'containerd 1.6',
  floor: 'floor',
};

/**
 * summaries[bench][target] = median result. A column per target of `targets` (COLUMNS' order), then minicri over
 * the reference (containerd 2.1.5) and over the floor.
 */
export function table(rows: Row[], summaries: Record<string, Record<string, Json>>, targets: readonly string[] = ['minicri', 'containerd', 'floor']): string {
  const cols = Object.keys(COLUMNS).filter((t) => targets.includes(t));
  const lines = [
    `| metric | ${cols.map((c) => COLUMNS[c]).join(' | ')} | minicri / containerd 2.1.5 | minicri / floor |`,
    `|---|${cols.map(() => '--:|').join('')}--:|--:|`,
  ];
  for (const r of rows) {
    const get = (target: string) => {
      const v = pick(summaries[r.bench]?.[target], r.path);
      return v === undefined ? undefined : v / (r.scale ?? 1);
    };
    const cells = cols.map((c) => fmt(get(c)));
    lines.push(`| ${r.metric} | ${cells.join(' | ')} | ${ratio(get('minicri'), get('containerd'))} | ${ratio(get('minicri'), get('floor'))} |`);
  }
  return lines.join('\n');
}
