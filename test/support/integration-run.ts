// `npm run test:integration`: the integration tests, one file at a time, inside one check of the host.
// node's test runner has no hook around a whole run, so this script snapshots the host (leaks.ts), runs
// `node --test`, and then fails the run, naming each object, if the host holds anything it did not
// before, even when every test passed: a leak from a suite without a check of its own, or one a suite's
// cleanup removed only after its own check, is still found.
// Usage: node dist/test/support/integration-run.js [test files or dirs; default: all of dist/test/integration/]
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describeLeaks, hostSnapshot, leaksSince } from './leaks.js';

const ALL = fileURLToPath(new URL('../integration/', import.meta.url));
const targets = process.argv.slice(2);

const before = await hostSnapshot();
const child = spawn(process.execPath, ['--test', '--test-concurrency=1', ...(targets.length > 0 ? targets : [ALL])], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
const testsCode = await new Promise<number>((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));

// A process told to stop by the last test's teardown may take a moment to exit: a leak must still be there after a settle.
let leaks = await leaksSince(before);
for (let i = 0; i < 50 && Object.keys(leaks).length > 0; i++) {
  await new Promise((r) => setTimeout(r, 100));
  leaks = await leaksSince(before);
}
if (Object.keys(leaks).length > 0) {
  process.stderr.write(`\nthe integration run left these on the host (not there before it started):\n${describeLeaks(leaks)}\n`);
  process.exit(testsCode === 0 ? 1 : testsCode);
}
process.stderr.write(`\nhost check after the integration run: nothing left behind\n`);
process.exit(testsCode);
