// Summarises a V8 .cpuprofile (from `npm run bench -- --cpu-prof`): the functions with the most self time,
// the files (packages) they are in, and which of our functions the time of `focus` (default: spawn, the
// synchronous fork+exec of every external tool) is spent for.
// Run: node dist/bench/profile.js bench/results/profiles/<file>.cpuprofile [top] [focus]
import { readFile } from 'node:fs/promises';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] }

const [file, topArg, focusArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: node dist/bench/profile.js <file.cpuprofile> [top]');
  process.exit(2);
}
const profile = JSON.parse(await readFile(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const selfUs = new Map<number, number>();
profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...selfUs.values()].reduce((a, b) => a + b, 0);

const where = (url: string) => url.replace(/^file:\/\//, '').replace(/^.*\/node_modules\//, 'npm:').replace(/^.*\/dist\//, '');
const fnTotals = new Map<string, number>();
const fileTotals = new Map<string, number>();
for (const [id, us] of selfUs) {
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
  const key = `${functionName || '(anonymous)'} ${where(url) || '(native)'}${url ? `:${lineNumber + 1}` : ''}`;
  fnTotals.set(key, (fnTotals.get(key) ?? 0) + us);
  const f = url ? where(url).replace(/^(npm:(@[^/]+\/)?[^/]+)\/.*$/, '$1') : functionName;
  fileTotals.set(f, (fileTotals.get(f) ?? 0) + us);
}
const top = Number(topArg ?? 25);
const show = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).slice(0, top)
  .map(([k, us]) => `${(us / 1000).toFixed(0).padStart(8)} ms ${(us / total * 100).toFixed(1).padStart(5)}%  ${k}`).join('\n');
// For `focus`: charge its self time to the nearest caller in minicri's own code.
const focus = focusArg ?? 'spawn';
const ours = /\/dist\/(server|oci|cni|netns)\//;
const focusCallers = new Map<string, number>();
for (const [id, us] of selfUs) {
  const fn = byId.get(id)!.callFrame.functionName;
  if (fn !== focus && !fn.endsWith(`.${focus}`)) continue;
  let at: number | undefined = id;
  while (at !== undefined && !ours.test(byId.get(at)!.callFrame.url)) at = parent.get(at);
  const frame = at === undefined ? undefined : byId.get(at)!.callFrame;
  const key = frame ? `${frame.functionName || '(anonymous)'} ${where(frame.url)}:${frame.lineNumber + 1}` : '(not from our code)';
  focusCallers.set(key, (focusCallers.get(key) ?? 0) + us);
}
console.log(`total sampled ${(total / 1e6).toFixed(1)} s\n\nself time by function:\n${show(fnTotals)}\n\nself time by file or package:\n${show(fileTotals)}\n\n${focus} self time by nearest caller in our code:\n${show(focusCallers)}`);
