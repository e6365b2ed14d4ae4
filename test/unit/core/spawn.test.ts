// Programs started through posix_spawn (core/spawn.ts): what the child gets, how its end is reported, and that
// starting one leaves the daemon's memory as it was (no copy-on-write, unlike a fork).
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { InvalidArgument } from '../../../core/errors.js';
import { makeNode } from '../../../core/posix.js';
import { decodeWaitStatus, run, shellStatus, spawn, type Subprocess } from '../../../core/spawn.js';
import { parseProcStat } from '../../../oci/runtime/runc-state.js';

const minorFaults = async () => parseProcStat(await readFile('/proc/self/stat', 'utf8')).minorFaults;

test('wait statuses: an exit status, or the signal that ended it', () => {
  assert.deepEqual(decodeWaitStatus(0), { code: 0, signal: null });
  assert.deepEqual(decodeWaitStatus(3 << 8), { code: 3, signal: null });
  assert.deepEqual(decodeWaitStatus(9), { code: null, signal: 'SIGKILL' });
  assert.deepEqual(decodeWaitStatus(6 | 0x80), { code: null, signal: 'SIGABRT' }, 'with a core dump, and its first name');
  assert.equal(shellStatus({ code: 3, signal: null }), 3);
  assert.equal(shellStatus({ code: null, signal: 'SIGKILL' }), 137, 'as a shell says it');
});

test('a run reports status, output and signal, feeds input, and sets env and cwd', async () => {
  assert.deepEqual(await run('sh', ['-c', 'echo out; echo err >&2; exit 3']), { code: 3, signal: null, stdout: 'out\n', stderr: 'err\n', aborted: false });
  assert.equal((await run('cat', [], { input: 'line\n' })).stdout, 'line\n');
  assert.deepEqual(await run('sh', ['-c', 'kill -TERM $$']), { code: null, signal: 'SIGTERM', stdout: '', stderr: '', aborted: false });
  const r = await run('sh', ['-c', 'echo "$PWD $ONLY ${HOME:-none}"'], { cwd: '/tmp', env: { ONLY: 'this', PATH: process.env.PATH } });
  assert.equal(r.stdout, '/tmp this none\n', 'the env given is the whole env');
  assert.equal((await run('head', ['-c', '100000', '/dev/zero'], { maxOutput: 10 })).stdout.length, 10, 'output past the cap is dropped');
});

test('the child starts with only its stdio fds, every signal at its default and none blocked, in a session of its own when detached', async () => {
  const fds = await run('sh', ['-c', 'ls /proc/$$/fd']);
  assert.deepEqual(fds.stdout.trim().split('\n').sort(), ['0', '1', '2']);
  const status = (await run('cat', ['/proc/self/status'])).stdout;
  const mask = (name: string) => BigInt(`0x${new RegExp(`^${name}:\\s*([0-9a-f]+)$`, 'm').exec(status)![1]}`);
  assert.equal(mask('SigBlk'), 0n);
  assert.equal(mask('SigIgn'), 0n, 'none ignored: not SIGPIPE (the daemon ignores it), nor glibc\'s own 32 and 33');
  const ids = await run('sh', ['-c', 'echo $$; ps -o sid= -p $$'], { detached: true });
  const [pid, sid] = ids.stdout.trim().split(/\s+/);
  assert.equal(sid, pid);
});

test('pipes beyond stdio, exit and close events, kill', async () => {
  const child = spawn('sh', ['-c', 'echo fd3 >&3; read line; echo "got $line"'], { stdio: ['pipe', 'pipe', 'ignore', 'pipe'] });
  const extra: Buffer[] = [];
  child.stdio[3]!.on('data', (b: Buffer) => extra.push(b));
  const out: Buffer[] = [];
  child.stdout!.on('data', (b: Buffer) => out.push(b));
  child.stdin!.end('x\n');
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve([code, signal])));
  const closed = new Promise((resolve) => child.once('close', (code, signal) => resolve([code, signal])));
  assert.deepEqual(await exited, [0, null]);
  assert.deepEqual(await closed, [0, null]);
  assert.equal(Buffer.concat(extra).toString(), 'fd3\n');
  assert.equal(Buffer.concat(out).toString(), 'got x\n');
  assert.equal(child.kill(), false, 'an ended child is not signalled');

  const sleeper = spawn('sleep', ['60'], { stdio: ['ignore', 'ignore', 'ignore'] });
  assert.equal(sleeper.kill('SIGKILL'), true);
  assert.deepEqual(await sleeper.exited, { code: null, signal: 'SIGKILL' });
});

test('a program that cannot start throws with its errno, and NUL bytes are refused before anything runs', async () => {
  assert.throws(() => spawn('/nonexistent/program', []), (e: NodeJS.ErrnoException) => e.code === 'ENOENT' && /nonexistent/.test(e.message));
  await assert.rejects(run('no-such-program-anywhere', []), { code: 'ENOENT' });
  assert.throws(() => spawn('echo', ['a\0b']), (e: Error) => e instanceof InvalidArgument && /NUL byte/.test(e.message));
});

test('an abort kills the child, and its whole group when detached', async () => {
  const ac = new AbortController();
  const done = run('sh', ['-c', 'sleep 60 & echo $!; wait'], { detached: true, signal: ac.signal });
  setTimeout(() => ac.abort(), 100);
  const r = await done;
  assert.equal(r.aborted, true);
  assert.equal(r.signal, 'SIGKILL');
  // The sleep in its group went too; orphaned, it is gone once its new parent has reaped it.
  const background = Number(r.stdout.trim());
  const gone = async () => (await readFile(`/proc/${background}/stat`, 'utf8').catch(() => '')).match(/^\d+ \(sleep\) [^Z]/) === null;
  for (const deadline = Date.now() + 10_000; !(await gone()) && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20));
  assert.ok(await gone(), `sleep ${background} still runs`);
});

test('starting a program leaves the daemon\'s pages as they were: no copy-on-write faults after it', async () => {
  const buf = Buffer.allocUnsafeSlow(64 << 20);
  buf.fill(1);
  // A fork would make all 16 384 pages fault again on the next write.
  await run('true', []);
  const before = await minorFaults();
  buf.fill(2);
  const faults = (await minorFaults()) - before;
  assert.ok(faults < 100, `${faults} page faults rewriting 64 MiB after a spawn`);
});

/** The child's 'close' status, or a message saying it did not come within `ms`. */
function closeWithin(child: Subprocess, ms: number): Promise<unknown> {
  const closed = new Promise((resolve) => child.once('close', resolve));
  const timeout = new Promise((resolve) => setTimeout(() => resolve(`no close within ${ms / 1000} s`), ms).unref());
  return Promise.race([closed, timeout]);
}

test('a pipe nobody reads is drained once the child has ended, so it closes', async () => {
  // More than the stream takes in before it stops reading, less than the socket holds: head ends meanwhile.
  const child = spawn('head', ['-c', '150000', '/dev/zero']);
  assert.equal(await closeWithin(child, 10_000), 0);
});

test('a pipe unpiped when its destination closed is drained too', async () => {
  const child = spawn('sh', ['-c', 'head -c 150000 /dev/zero; sleep 0.2']);
  const sink = new PassThrough({ highWaterMark: 1024 });
  child.stdout!.pipe(sink);
  await new Promise((resolve) => child.stdout!.once('data', resolve));
  sink.destroy();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(child.stdout!.readableFlowing, false, 'paused by the unpipe');
  assert.equal(await closeWithin(child, 10_000), 0);
});

// Runs a script with the built module, in a Node of its own, and returns what it printed and its status.
async function inNode(script: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const module = fileURLToPath(new URL('../../../core/spawn.js', import.meta.url));
  return run(process.execPath, ['--input-type=module', '-e', `import { spawn } from ${JSON.stringify(module)};\n${script}`]);
}

test('a running child keeps the process alive until its exit is reported, unless unref\'d; the process may end before it', async () => {
  const held = await inNode(`const c = spawn('sleep', ['0.2'], { stdio: ['ignore', 'ignore', 'ignore'] });
    c.on('exit', (code) => console.log('exit', code));`);
  assert.deepEqual([held.code, held.stdout, held.stderr], [0, 'exit 0\n', '']);
  const started = Date.now();
  const loose = await inNode(`const c = spawn('sh', ['-c', 'sleep 0.3; echo late'], { stdio: ['ignore', 'ignore', 'ignore'] });
    c.on('exit', () => console.log('exit seen'));
    c.unref();`);
  assert.deepEqual([loose.code, loose.stdout, loose.stderr], [0, '', '']);
  assert.ok(Date.now() - started < 10_000, 'it did not wait for the child');
  // The child's end comes while, or after, the process has gone: nothing of it may crash that exit.
  for (let i = 0; i < 5; i++) {
    const racing = await inNode(`spawn('true', [], { stdio: ['ignore', 'ignore', 'ignore'] }).unref();
      const t = Date.now(); while (Date.now() - t < ${i * 2}) {}`);
    assert.deepEqual([racing.code, racing.stderr], [0, ''], `exit ${i}`);
  }
});

test('an exit listener that throws costs the other children nothing', async () => {
  const r = await inNode(`process.on('uncaughtException', (e) => console.log('thrown:', e.message));
    const children = Array.from({ length: 5 }, () => spawn('true', [], { stdio: ['ignore', 'ignore', 'ignore'] }));
    children[0].once('exit', () => { throw new Error('listener'); });
    // Busy while they all end, so their reports arrive in one read.
    const t = Date.now(); while (Date.now() - t < 300) {}
    const exits = await Promise.all(children.map((c) => c.exited));
    console.log(exits.map((e) => e.code).join(','));`);
  assert.equal(r.stderr, '');
  assert.deepEqual(r.stdout.trim().split('\n').sort(), ['0,0,0,0,0', 'thrown: listener']);
});

test('device nodes and fifos get exactly the mode asked for, whatever the umask', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-mknod-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const old = process.umask(0o077);
  try {
    makeNode(join(dir, 'fifo'), 'p', 0o664);
    makeNode(join(dir, 'null'), 'c', 0o666, 1, 3);
    makeNode(join(dir, 'whiteout'), 'c', 0);
  } finally {
    process.umask(old);
  }
  const fifo = await stat(join(dir, 'fifo'));
  assert.ok(fifo.isFIFO());
  assert.equal(fifo.mode & 0o7777, 0o664);
  const dev = await stat(join(dir, 'null'));
  assert.ok(dev.isCharacterDevice());
  assert.equal(dev.rdev, (1 << 8) | 3);
  assert.equal(dev.mode & 0o7777, 0o666);
  assert.equal((await stat(join(dir, 'whiteout'))).rdev, 0);
  assert.throws(() => makeNode(join(dir, 'fifo'), 'p', 0o600), { code: 'EEXIST' });
});
