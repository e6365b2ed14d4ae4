// What the modules the daemon loads cost in resident memory: each set imported in a fresh node (with the
// daemon's flags and environment, the module loaders already warm), its RSS after a full GC against that of a
// process that imported nothing of ours. The daemon's RSS just after start is the footprint bench's; this
// says where it comes from. Run: npm run build && node dist/bench/module-cost.js [runs]
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MAIN } from '../test/support/daemon.js';
import { median } from './lib/stats.js';
import { shebangNodeCommand } from './lib/targets.js';

const dist = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));

/**
 * What is measured, as growing sets: alone, most modules seem to cost 5 to 10 MiB, as the first sizeable code
 * commits V8 heap and code pages any module would share, so single-module figures do not add up. `then`
 * runs after the imports (`m` is the last module imported).
 */
const SETS: { name: string; specifiers: string[]; then?: string }[] = [
  { name: 'grpc-js and the CRI proto loaded: what any Node CRI server holds', specifiers: ['@grpc/grpc-js', dist('server/proto.js')], then: 'm.loadCri()' },
  { name: 'plus the store, logger, exec and config libraries', specifiers: ['@grpc/grpc-js', 'better-sqlite3', 'pino', 'execa', 'zod', 'smol-toml', dist('server/proto.js')], then: 'm.loadCri()' },
  { name: 'everything the daemon imports (streaming, images, CNI, CDI included)', specifiers: [dist('server/daemon.js'), dist('server/assemble.js'), dist('server/proto.js')], then: 'm.loadCri()' },
];

const { env, nodeFlags } = shebangNodeCommand(readFileSync(MAIN, 'utf8'));

/** RSS in KiB of a fresh node that imported `specifiers` (only a tiny module of ours when none), after a full GC. */
function rssAfter(specifiers: string[] = [], then?: string): number {
  const body = [
    // The loaders' own first use (ESM and CommonJS) is not any module's cost.
    `await import(${JSON.stringify(dist('core/time.js'))}); require(${JSON.stringify(dist('../package.json'))});`,
    'let m;',
    ...specifiers.map((specifier) => `m = await import(${JSON.stringify(specifier)});`),
    then ?? '',
    'globalThis.gc(); globalThis.gc();',
    "process.stdout.write(String(Number(/VmRSS:\\s+(\\d+)/.exec(require('node:fs').readFileSync('/proc/self/status', 'utf8'))[1])));",
  ].join('\n');
  const script = `const require = (await import('node:module')).createRequire(import.meta.url);\n${body}`;
  const out = execFileSync(process.execPath, [...nodeFlags, '--expose-gc', '--input-type=module', '-e', script], {
    cwd: dist(''), env: { ...process.env, ...env }, encoding: 'utf8',
  });
  return Number(out);
}

const runs = Number(process.argv[2] ?? 5);
const sample = (specifiers?: string[], then?: string) => median(Array.from({ length: runs }, () => rssAfter(specifiers, then)));
const base = sample();
const mib = (kib: number) => Math.round((kib / 1024) * 10) / 10;
const costs = SETS.map((set) => ({ modules: set.name, addedMiB: mib(sample(set.specifiers, set.then) - base) }));
console.log(JSON.stringify({ bench: 'module-cost', runs, nodeAloneMiB: mib(base), costs }, null, 1));
console.log(`\n| loaded | RSS (MiB) |\n|---|--:|\n| node alone | ${mib(base)} |`);
for (const c of costs) console.log(`| ${c.modules} | ${mib(base + c.addedMiB * 1024)} (+${c.addedMiB}) |`);
