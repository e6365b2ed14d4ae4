// The pause binary as a pod's PID 1, and conmon outliving the process that started it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { OciRuntime } from '../../../oci/runtime/runc.js';
import { silentLogger } from '../../../core/log.js';
import { setup, uniqueId, waitFor, conmonsMentioning, runcIds, RUNC, CONMON } from './helpers.js';

const repo = fileURLToPath(new URL('../../../../', import.meta.url));
const pauseBinary = `${repo}dist/pause/pause`;

async function buildPause(): Promise<void> {
  await execa(`${repo}scripts/build-native.sh`);
}

async function statusField(pid: number, field: string): Promise<string | undefined> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return new RegExp(`^${field}:\\s*(.*)$`, 'm').exec(text)?.[1];
}

/** Host pids of the processes whose parent is `ppid`, with their state letter. */
async function childrenOf(ppid: number): Promise<{ pid: number; state: string }[]> {
  const out: { pid: number; state: string }[] = [];
  for (const p of await readdir('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    const text = await readFile(`/proc/${p}/stat`, 'utf8').catch(() => undefined);
    if (!text) continue;
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    if (Number(rest[1]) === ppid) out.push({ pid: Number(p), state: rest[0]! });
  }
  return out;
}

test('pause is a small static binary that exits 0 on SIGTERM even outside a container', async () => {
  await buildPause();
  const ldd = await execa('ldd', [pauseBinary], { reject: false });
  assert.match(`${ldd.stdout}${ldd.stderr}`, /not a dynamic executable|statically linked/);
  const sub = execa(pauseBinary, { reject: false });
  await new Promise((r) => setTimeout(r, 100));
  sub.kill('SIGTERM');
  const r = await sub;
  assert.equal(r.exitCode, 0);
  assert.match(r.stderr, /not PID 1/);
});

test('pause runs as PID 1, reaps orphans and exits 0 on SIGTERM and SIGINT', async (t) => {
  await buildPause();
  const env = await setup(t);
  for (const signal of ['SIGTERM', 'SIGINT']) {
    const id = uniqueId('pause');
    const bundle = await env.bundle(id, ['/pause'], { extra: { '/pause': pauseBinary } });
    const { pid } = await env.rt.create({ id, bundle, logPath: env.logPath(id) });
    await env.rt.start(id);
    assert.equal((await env.rt.state(id))?.status, 'running');
    assert.match((await statusField(pid, 'NSpid')) ?? '', /\s1$/, 'pause is PID 1 in its namespace');

    // An orphan inside the pod is re-parented to pause, which must reap it when it exits.
    // (runc exec returns only once nothing holds its output pipes, hence the redirections.)
    const r = await env.rt.execSync(id, ['/bin/sh', '-c', 'sleep 1 </dev/null >/dev/null 2>&1 & exit 0'], { timeoutSec: 10 });
    assert.equal(r.exitCode, 0);
    await waitFor('orphan adopted by pause', async () => (await childrenOf(pid)).length > 0, 2000);
    await waitFor('orphan reaped', async () => (await childrenOf(pid)).length === 0, 5000);

    await env.rt.kill(id, signal);
    const exit = await waitFor('pause exit', () => env.rt.exitStatus(id));
    assert.equal(exit.exitCode, 0, `exit code after ${signal}`);
    await env.rt.delete(id);
  }
});

test('conmon survives the process that started it and the container stays manageable', async (t) => {
  const env = await setup(t);
  const id = uniqueId('detach');
  const bundle = await env.bundle(id, ['/bin/sleep', '100']);
  const runtimeModule = new URL('../../../oci/runtime/runc.js', import.meta.url).href;
  const logModule = new URL('../../../core/log.js', import.meta.url).href;
  // A separate daemon process creates and starts the container, then exits.
  const script = `
    const { OciRuntime } = await import(${JSON.stringify(runtimeModule)});
    const { silentLogger } = await import(${JSON.stringify(logModule)});
    const rt = new OciRuntime({ ...${JSON.stringify({ runtimePath: RUNC, conmonPath: CONMON, root: env.root, stateDir: env.stateDir })}, log: silentLogger });
    const { pid } = await rt.create(${JSON.stringify({ id, bundle, logPath: env.logPath(id) })});
    await rt.start(${JSON.stringify(id)});
    console.log(pid);
  `;
  const daemon = await execa(process.execPath, ['--input-type=module', '-e', script], { timeout: 30_000 });
  assert.ok(Number(daemon.stdout) > 0);

  const [conmon] = await conmonsMentioning(env.stateDir);
  assert.ok(conmon, 'conmon is still running');
  assert.notEqual(await statusField(conmon, 'PPid'), String(process.pid));
  // Its own session: terminal hangups and signals to our process group do not reach it.
  const [conmonStat, ourStat] = await Promise.all([readFile(`/proc/${conmon}/stat`, 'utf8'), readFile('/proc/self/stat', 'utf8')]);
  const sid = (s: string) => s.slice(s.lastIndexOf(')') + 2).split(' ')[3];
  assert.notEqual(sid(conmonStat), sid(ourStat));

  // A fresh runtime instance (as after a daemon restart) finds and manages the container.
  const rt = new OciRuntime({ runtimePath: RUNC, conmonPath: CONMON, root: env.root, stateDir: env.stateDir, log: silentLogger });
  assert.deepEqual(await rt.list(), [id]);
  assert.equal((await rt.state(id))?.status, 'running');
  await rt.stop(id, { timeoutSec: 1 }); // sleep as PID 1 ignores SIGTERM: killed after the timeout
  assert.equal((await rt.exitStatus(id))?.exitCode, 137);
  await rt.delete(id);
  assert.deepEqual(await runcIds(env.root), []);
  assert.deepEqual(await conmonsMentioning(env.stateDir), []);
});
