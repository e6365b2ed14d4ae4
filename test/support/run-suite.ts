// `npm run test:unit|test:integration|test:node|test:vm`: one suite's tests inside one check of the host.
// node's test runner has no hook around a whole run, so this script snapshots the host (leaks.ts), runs
// `node --test` on the suite's files, and then fails the run, naming each object, if the host holds
// anything it did not before, even when every test passed: a leak from a suite without a check of its
// own, or one a suite's cleanup removed only after its own check, is still found.
// The files are listed here, sorted, and handed over one by one: node 21 and later run a directory
// argument as a module, and a glob would depend on the node or the shell.
// Usage: node dist/test/support/run-suite.js <unit|integration|node|vm> [test files or dirs; default: the whole suite]
import { spawn } from 'node:child_process';
import type { Dirent } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeLeaks, hostSnapshot, settledLeaks } from './leaks.js';

/** The unit tests run in parallel (the runner's default); the others share the host's daemons and networks, one file at a time. */
const SUITES: Record<string, { serial: boolean }> = { unit: { serial: false }, integration: { serial: true }, node: { serial: true }, vm: { serial: true } };

/** Every `*.test.js` below `path` (or `path` itself), sorted; none when it does not exist. */
async function testFiles(path: string): Promise<string[]> {
  const info = await stat(path).catch(() => undefined);
  if (!info) return [];
  if (!info.isDirectory()) return [path];
  const entries = await readdir(path, { withFileTypes: true, recursive: true }) as Dirent[];
  // `parentPath` is node 20.12's name for what 20.1 called `path`.
  const dirOf = (e: Dirent) => (e as Dirent & { parentPath?: string }).parentPath ?? (e as Dirent & { path: string }).path;
  return entries.filter((e) => e.isFile() && e.name.endsWith('.test.js')).map((e) => join(dirOf(e), e.name)).sort();
}

const [suite, ...targets] = process.argv.slice(2);
const options = suite ? SUITES[suite] : undefined;
if (!options) {
  process.stderr.write(`usage: run-suite.js <${Object.keys(SUITES).join('|')}> [test files or dirs]\n`);
  process.exit(2);
}
const suiteDir = fileURLToPath(new URL(`../${suite}/`, import.meta.url));
const files = (await Promise.all((targets.length > 0 ? targets.map((t) => resolve(t)) : [suiteDir]).map(testFiles))).flat();
if (files.length === 0) {
  process.stderr.write(`no *.test.js files in ${targets.length > 0 ? targets.join(' ') : suiteDir}: build first (npm run build)\n`);
  process.exit(1);
}

const before = await hostSnapshot();
const child = spawn(process.execPath, ['--test', ...(options.serial ? ['--test-concurrency=1'] : []), ...files], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
const testsCode = await new Promise<number>((done) => child.once('exit', (code, signal) => done(code ?? (signal ? 1 : 0))));

// A process told to stop by the last test's teardown may take a moment to exit.
const leaks = await settledLeaks(before, 5000);
if (Object.keys(leaks).length > 0) {
  process.stderr.write(`\nthe ${suite} tests left these on the host (not there before they started):\n${describeLeaks(leaks)}\n`);
  process.exit(testsCode === 0 ? 1 : testsCode);
}
process.stderr.write(`\nhost check after the ${suite} tests: nothing left behind\n`);
process.exit(testsCode);
