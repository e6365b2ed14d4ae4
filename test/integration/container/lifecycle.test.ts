// Containers through the real daemon: output and CRI log files, exit codes and reasons, OOM kills,
// stop timeouts, exec, log reopening, stats, resource updates, listing, bad requests and removal.
import assert from 'node:assert/strict';
import { readFile, rename, stat } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import { joinCriLogEntries, parseCriLog } from '../../../oci/runtime/logs.js';
import { waitFor } from '../../support/cni-env.js';
import { containerConfig } from '../../support/pods.js';
import { ContainerEnv, sleep } from './env.js';

const MiB = 1024 * 1024;

function grpcCode(code: grpc.status, details?: RegExp) {
  return (err: grpc.ServiceError) => {
    assert.equal(err.code, code, `expected ${grpc.status[code]}, got ${grpc.status[err.code]}: ${err.details}`);
    if (details) assert.match(err.details, details);
    return true;
  };
}

/** The container's memory cgroup directory (cgroup v1), from its init process. */
async function memoryCgroup(pid: number): Promise<string> {
  const line = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n').find((l) => /^\d+:memory:/.test(l))!;
  return `/sys/fs/cgroup/memory${line.slice(line.lastIndexOf(':') + 1)}`;
}

async function pidOf(env: ContainerEnv, id: string): Promise<number> {
  const s = await env.rt.runtime.call('ContainerStatus', { container_id: id, verbose: true });
  return (JSON.parse(s.info.info!) as { pid: number }).pid;
}

describe('containers', () => {
  let env: ContainerEnv;
  before(async () => { env = await ContainerEnv.start(70); });
  after(() => env.stop());

  it('writes stdout and stderr to the CRI log file, splitting a long line into P…F entries', async (t) => {
    const pod = await env.runPod(t, 'logs');
    const long = 'x'.repeat(40 * 1024);
    const id = await env.run(pod, 'echo', ['sh', '-c', `echo hello out; echo hello err >&2; printf '%s\\n' "${long}"`]);
    const s = await env.waitExited(id);
    assert.equal(s.exit_code, 0);
    assert.equal(s.reason, 'Completed');
    assert.equal(s.log_path, `${pod.config.log_directory}/echo/0.log`);
    const entries = parseCriLog(await readFile(s.log_path, 'utf8'));
    const lines = joinCriLogEntries(entries);
    assert.deepEqual(lines.map((l) => [l.stream, l.content.length > 100 ? `long ${l.content.length}` : l.content]).sort(),
      [['stderr', 'hello err'], ['stdout', 'hello out'], ['stdout', `long ${long.length}`]].sort());
    assert.equal(lines.find((l) => l.content.length > 100)!.content, long);
    // The long line's entries: P ones, then the F that ends it (conmon may write that one empty).
    const from = entries.findIndex((e) => e.content.startsWith('x'));
    const to = entries.findIndex((e, i) => i >= from && e.stream === 'stdout' && !e.partial);
    const longEntries = entries.slice(from, to + 1).filter((e) => e.stream === 'stdout');
    assert.ok(longEntries.length >= 3, 'a 40 KiB line takes several entries');
    assert.ok(longEntries.slice(0, -1).every((e) => e.partial), 'P entries, then one F');
    assert.ok(longEntries.every((e) => Buffer.byteLength(e.content) <= 16 * 1024));
    assert.ok(Number(s.finished_at) >= Number(s.started_at) && Number(s.started_at) >= Number(s.created_at));
  });

  it('reports exit codes 0, 1 and 137 with Completed and Error', async (t) => {
    const pod = await env.runPod(t, 'exits');
    const zero = await env.run(pod, 'zero', ['sh', '-c', 'exit 0']);
    const one = await env.run(pod, 'one', ['sh', '-c', 'exit 1']);
    // The container's init ignores signals sent from inside its own PID namespace: kill it from the host.
    const killed = await env.run(pod, 'killed', ['sleep', '1000']);
    process.kill(await pidOf(env, killed), 'SIGKILL');
    for (const [id, code, reason] of [[zero, 0, 'Completed'], [one, 1, 'Error'], [killed, 137, 'Error']] as const) {
      const s = await env.waitExited(id);
      assert.deepEqual([s.metadata!.name, s.exit_code, s.reason], [s.metadata!.name, code, reason]);
    }
  });

  it('reports OOMKilled when a container outgrows its memory limit', async (t) => {
    const pod = await env.runPod(t, 'oom');
    // dd fills a 256 MiB block against a 32 MiB limit; as the container's init it takes the container down.
    const id = await env.run(pod, 'hog', ['dd', 'if=/dev/zero', 'of=/dev/null', 'bs=256M', 'count=1'], (c) => {
      c.linux = { resources: { memory_limit_in_bytes: 32 * MiB } };
    });
    const s = await env.waitExited(id);
    assert.equal(s.reason, 'OOMKilled');
    assert.equal(s.exit_code, 137);
  });

  it('stops with the stop signal, waits the timeout for a container that traps it, then kills it', async (t) => {
    const pod = await env.runPod(t, 'stop');
    const polite = await env.run(pod, 'polite', ['sh', '-c', "trap 'exit 3' TERM; while :; do sleep 0.1; done"]);
    const stubborn = await env.run(pod, 'stubborn', ['sh', '-c', "trap 'echo ignored TERM' TERM; while :; do sleep 0.1; done"]);
    await sleep(300); // let the shells install their traps
    await env.rt.runtime.call('StopContainer', { container_id: polite, timeout: 10 });
    // It exited on TERM by itself (3), not killed (137) at the end of the timeout. (How long stops take: bench/lifecycle.ts.)
    assert.equal((await env.status(polite)).exit_code, 3);

    await env.rt.runtime.call('StopContainer', { container_id: stubborn, timeout: 2 });
    // It got TERM first and was still running to answer it (its trap wrote to the log), then it was killed (137).
    const s = await env.status(stubborn);
    assert.equal(s.state, 'CONTAINER_EXITED');
    assert.equal(s.exit_code, 137);
    assert.match(await readFile(s.log_path, 'utf8'), /stdout F ignored TERM/);
    // The image's StopSignal replaces SIGTERM.
    const usr1 = await env.run(pod, 'usr1', ['sh', '-c', "trap 'echo got USR1; exit 4' USR1; while :; do sleep 0.1; done"], undefined, env.images.usr1);
    await sleep(300);
    await env.rt.runtime.call('StopContainer', { container_id: usr1, timeout: 10 });
    const u = await env.status(usr1);
    assert.equal(u.exit_code, 4);
    assert.match(await readFile(u.log_path, 'utf8'), /stdout F got USR1/);
    // Stopping again is a no-op.
    await env.rt.runtime.call('StopContainer', { container_id: stubborn, timeout: 2 });
    // A created container that is stopped never runs; stopping the pod kills what still runs in it at once.
    const never = await env.create(pod, 'never', ['sleep', '1000']);
    await env.rt.runtime.call('StopContainer', { container_id: never, timeout: 10 });
    const neverStatus = await env.status(never);
    assert.equal(neverStatus.state, 'CONTAINER_EXITED');
    assert.notEqual(neverStatus.exit_code, 0, 'a container that never ran does not read as a success');
    await assert.rejects(env.rt.runtime.call('StartContainer', { container_id: never }), grpcCode(grpc.status.FAILED_PRECONDITION));
    const last = await env.run(pod, 'last', ['sleep', '1000']);
    await env.rt.runtime.call('StopPodSandbox', { pod_sandbox_id: pod.id });
    assert.deepEqual([(await env.status(last)).state, (await env.status(last)).exit_code], ['CONTAINER_EXITED', 137]);
  });

  it('runs ExecSync with output and exit code, and times it out with DEADLINE_EXCEEDED', async (t) => {
    const pod = await env.runPod(t, 'exec');
    const id = await env.run(pod, 'sleeper', ['sleep', '1000']);
    const r = await env.exec(id, 'echo out; echo err >&2; exit 5');
    assert.deepEqual(r, { stdout: 'out\n', stderr: 'err\n', exitCode: 5 });
    await assert.rejects(env.exec(id, 'sleep 30', 1), grpcCode(grpc.status.DEADLINE_EXCEEDED));
    // The timed-out command was killed, not left running; the container itself goes on.
    const ps = await env.exec(id, 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline; echo; done');
    assert.match(ps.stdout, /sleep 1000/);
    assert.doesNotMatch(ps.stdout, /sleep 30/);
    assert.equal((await env.status(id)).state, 'CONTAINER_RUNNING');
  });

  it('reopens the log file after kubelet renamed it', async (t) => {
    const pod = await env.runPod(t, 'reopen');
    const id = await env.run(pod, 'ticker', ['sh', '-c', 'i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done']);
    const logPath = (await env.status(id)).log_path;
    await sleep(300);
    await rename(logPath, `${logPath}.1`);
    await env.rt.runtime.call('ReopenContainerLog', { container_id: id });
    const ticks = (text: string) => joinCriLogEntries(parseCriLog(text)).map((l) => Number(l.content.split(' ')[1]));
    for (const deadline = Date.now() + 5000; ticks(await readFile(logPath, 'utf8')).length < 2;) {
      assert.ok(Date.now() < deadline, 'the new log file gets lines');
      await sleep(100);
    }
    const [old, fresh] = await Promise.all([readFile(`${logPath}.1`, 'utf8'), readFile(logPath, 'utf8')]);
    assert.ok(ticks(old).length > 0 && ticks(fresh).length > 0, 'both files hold lines');
    assert.ok(Math.min(...ticks(fresh)) > Math.max(...ticks(old)), 'the new file continues where the old one stopped');
  });

  it('reports cpu and memory for a busy container and its pod', async (t) => {
    const pod = await env.runPod(t, 'stats');
    // 1 MiB written to its writable layer, 2 MB held in memory, and a spinning CPU.
    const id = await env.run(pod, 'busy', ['sh', '-c', 'head -c 1048576 /dev/zero > /layer-data; x=$(head -c 2000000 /dev/zero | tr "\\0" a); while :; do :; done']);
    await sleep(1000);
    assert.equal((await env.exec(id, 'wc -c < /layer-data')).stdout.trim(), '1048576');
    const first = (await env.rt.runtime.call('ContainerStats', { container_id: id })).stats!;
    await sleep(500);
    const { stats } = await env.rt.runtime.call('ListContainerStats', { filter: { pod_sandbox_id: pod.id } });
    assert.deepEqual(stats.map((s) => s.attributes!.id), [id]);
    const second = stats[0]!;
    assert.ok(Number(first.cpu!.usage_core_nano_seconds!.value) > 0, 'cpu time');
    assert.ok(Number(second.cpu!.usage_core_nano_seconds!.value) > Number(first.cpu!.usage_core_nano_seconds!.value), 'cpu time grows');
    // A rate from two samples: there is one on the second, a whole number of nanocores; its size is not claimed.
    assert.ok(Number.isSafeInteger(Number(second.cpu!.usage_nano_cores?.value)), `a CPU rate from two samples: ${second.cpu!.usage_nano_cores?.value}`);
    assert.ok(Number(second.memory!.working_set_bytes!.value) > 0, 'memory working set');
    assert.ok(Number(second.writable_layer!.used_bytes!.value) >= 1048576, `the writable layer holds the file written: ${second.writable_layer!.used_bytes!.value} bytes`);
    assert.ok(Number(second.writable_layer!.inodes_used!.value) >= 1, 'and its inode');
    const podStats = (await env.rt.runtime.call('PodSandboxStats', { pod_sandbox_id: pod.id })).stats!;
    assert.ok(Number(podStats.linux!.cpu!.usage_core_nano_seconds!.value) >= Number(second.cpu!.usage_core_nano_seconds!.value));
    assert.ok(Number(podStats.linux!.memory!.working_set_bytes!.value) > 0);
    assert.deepEqual(podStats.linux!.containers.map((c) => c.attributes!.id), [id]);
    const listed = (await env.rt.runtime.call('ListPodSandboxStats', { filter: { id: pod.id } })).stats;
    assert.deepEqual(listed.map((p) => p.attributes!.id), [pod.id]);
    assert.ok(Number(listed[0]!.linux!.cpu!.usage_core_nano_seconds!.value) > 0);
  });

  it('changes the memory limit with UpdateContainerResources', async (t) => {
    const pod = await env.runPod(t, 'update');
    const id = await env.run(pod, 'limited', ['sleep', '1000'], (c) => { c.linux = { resources: { memory_limit_in_bytes: 64 * MiB } }; });
    const cgroup = await memoryCgroup(await pidOf(env, id));
    const limit = async () => Number((await readFile(`${cgroup}/memory.limit_in_bytes`, 'utf8')).trim());
    assert.equal(await limit(), 64 * MiB);
    await env.rt.runtime.call('UpdateContainerResources', { container_id: id, linux: { memory_limit_in_bytes: 128 * MiB } });
    assert.equal(await limit(), 128 * MiB);
    assert.equal((await env.status(id)).resources!.linux!.memory_limit_in_bytes, String(128 * MiB));
  });

  it('lists containers by id, pod, state and labels', async (t) => {
    const a = await env.runPod(t, 'list-a');
    const b = await env.runPod(t, 'list-b');
    const running = await env.run(a, 'running', ['sleep', '1000'], (c) => { c.image!.user_specified_image = 'root:as-in-the-pod-spec'; });
    const created = await env.create(a, 'created', ['sleep', '1000']);
    const done = await env.run(b, 'done', ['true']);
    await env.waitExited(done);
    const list = async (filter: object) =>
      (await env.rt.runtime.call('ListContainers', { filter })).containers.map((c) => c.id).filter((i) => [running, created, done].includes(i)).sort();
    assert.deepEqual(await list({}), [running, created, done].sort());
    assert.deepEqual(await list({ pod_sandbox_id: a.id }), [running, created].sort());
    assert.deepEqual(await list({ id: done.slice(0, 12) }), [done]);
    assert.deepEqual(await list({ state: { state: 'CONTAINER_RUNNING' } }), [running]);
    assert.deepEqual(await list({ state: { state: 'CONTAINER_CREATED' } }), [created]);
    assert.deepEqual(await list({ state: { state: 'CONTAINER_EXITED' } }), [done]);
    assert.deepEqual(await list({ label_selector: { container: 'running' } }), [running]);
    const summary = (await env.rt.runtime.call('ListContainers', { filter: { id: running } })).containers[0]!;
    assert.equal(summary.pod_sandbox_id, a.id);
    assert.equal(summary.metadata!.name, 'running');
    assert.equal(summary.image!.image, env.images.root);
    assert.equal(summary.image!.user_specified_image, 'root:as-in-the-pod-spec', 'the image as the client named it, as given');
    assert.equal((await env.status(running)).image!.user_specified_image, 'root:as-in-the-pod-spec');
    // Listed: the image ID in both fields (what kubelet's image GC matches against ListImages, before and
    // after image_id existed). The status: the digested reference kubelet shows as the pod's imageID.
    const image = (await env.rt.image.call('ImageStatus', { image: { image: env.images.root } })).image!;
    assert.equal(summary.image_ref, image.id);
    assert.equal(summary.image_id, image.id);
    const status = await env.status(running);
    assert.equal(status.image_ref, image.repo_digests[0]);
    assert.match(status.image_ref, /@sha256:[0-9a-f]{64}$/);
    assert.equal(status.image_id, image.id);
    const plain = (await env.rt.runtime.call('ListContainers', { filter: { id: created } })).containers[0]!;
    assert.equal(plain.image!.user_specified_image, '', 'nothing is made up when the client gave none');
    // An exit found by the list alone, as kubelet's relist finds it, with no ContainerStatus call first.
    const quick = await env.run(b, 'quick', ['true']);
    const listed = async () => (await env.rt.runtime.call('ListContainers', { filter: { id: quick } })).containers[0]!.state;
    await waitFor(async () => (await listed()) === 'CONTAINER_EXITED', 15_000, 'ListContainers to list the exit');
    assert.equal((await env.status(quick)).reason, 'Completed');
  });

  it('refuses bad CreateContainer requests with the right codes and leaves nothing', async (t) => {
    const pod = await env.runPod(t, 'bad');
    const create = (config: ReturnType<typeof containerConfig>, podId = pod.id) =>
      env.rt.runtime.call('CreateContainer', { pod_sandbox_id: podId, config, sandbox_config: pod.config });
    const unknown = '127.0.0.1:1/test/nothere:1';
    await assert.rejects(create(containerConfig('noimage', unknown, ['true'])), grpcCode(grpc.status.NOT_FOUND, new RegExp(unknown.replaceAll('.', '\\.'))));
    await assert.rejects(create(containerConfig('escape', env.images.root, ['true'], (c) => { c.log_path = '../../etc/evil.log'; })),
      grpcCode(grpc.status.INVALID_ARGUMENT, /log_path/));
    const first = await env.create(pod, 'twice', ['true']);
    await assert.rejects(create(containerConfig('twice', env.images.root, ['true'])), grpcCode(grpc.status.ALREADY_EXISTS, new RegExp(first)));
    const ids = (await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } })).containers.map((c) => c.id);
    assert.deepEqual(ids, [first]);
    assert.deepEqual((await env.runcList()).filter((i) => i !== pod.id), [first]);

    const stopped = await env.runPod(t, 'notready');
    await env.rt.runtime.call('StopPodSandbox', { pod_sandbox_id: stopped.id });
    await assert.rejects(env.rt.runtime.call('CreateContainer', { pod_sandbox_id: stopped.id, config: containerConfig('late', env.images.root, ['true']), sandbox_config: stopped.config }),
      grpcCode(grpc.status.FAILED_PRECONDITION, new RegExp(`${stopped.id}.*NOTREADY`)));
    await assert.rejects(env.rt.runtime.call('StartContainer', { container_id: 'f'.repeat(64) }), grpcCode(grpc.status.NOT_FOUND));
  });

  it('undoes a failed create completely and frees the name; starting twice is refused', async (t) => {
    const pod = await env.runPod(t, 'failing');
    const before = await readFile('/proc/self/mounts', 'utf8').then((m) => m.split('\n').filter((l) => l.includes(env.dirs.base)).length);
    // runc checks the executable at create time.
    await assert.rejects(env.create(pod, 'missing', ['/no/such/binary']), grpcCode(grpc.status.INTERNAL, /no\/such\/binary/));
    assert.deepEqual((await env.rt.runtime.call('ListContainers', { filter: { pod_sandbox_id: pod.id } })).containers, []);
    assert.deepEqual((await env.runcList()).filter((i) => i !== pod.id), []);
    const after = await readFile('/proc/self/mounts', 'utf8').then((m) => m.split('\n').filter((l) => l.includes(env.dirs.base)).length);
    assert.equal(after, before, 'no rootfs mount is left');
    // The name is free again.
    const id = await env.create(pod, 'missing', ['sleep', '1000']);
    await env.rt.runtime.call('StartContainer', { container_id: id });
    await assert.rejects(env.rt.runtime.call('StartContainer', { container_id: id }), grpcCode(grpc.status.FAILED_PRECONDITION, /RUNNING/));
    await env.rt.runtime.call('RemoveContainer', { container_id: id });
    assert.equal(await env.create(pod, 'missing', ['true']).then((i) => i.length), 64, 'a removed container frees its name');
  });

  it('orders a create and a concurrent pod removal: the container is removed with the pod or never made', async (t) => {
    for (const delay of [0, 10, 20, 40]) {
      const pod = await env.runPod(t, `race${delay}`);
      const creating = env.create(pod, 'late', ['sleep', '1000']).catch((err: grpc.ServiceError) => err);
      await sleep(delay);
      await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod.id });
      const created = await creating;
      if (typeof created !== 'string') {
        // Too late is a clear answer about the sandbox, never a half-made container.
        assert.ok([grpc.status.NOT_FOUND, grpc.status.FAILED_PRECONDITION].includes(created.code), `delay ${delay}: ${created.details}`);
      }
      const orphans = (await env.rt.runtime.call('ListContainers', {})).containers.filter((c) => c.pod_sandbox_id === pod.id);
      assert.deepEqual(orphans, [], 'no container record of the removed pod');
      assert.deepEqual(await env.runcList(), [], 'runc knows nothing of the removed pod');
    }
  });

  it('removes a container completely: no conmon, no rootfs mount, no runc state, no directory', async (t) => {
    const pod = await env.runPod(t, 'remove');
    const id = await env.run(pod, 'gone', ['sleep', '1000']);
    const dir = `${env.dirs.rootDir}/containers/${id}`;
    await stat(dir);
    assert.ok((await env.runcList()).includes(id));
    assert.ok((await readFile('/proc/self/mounts', 'utf8')).includes(id), 'the rootfs is mounted while it exists');
    // conmon's command line names the container id.
    const conmons = async () => (await execa('pgrep', ['-x', 'conmon', '-a'], { reject: false })).stdout.split('\n').filter((l) => l.includes(id));
    assert.equal((await conmons()).length, 1, 'one conmon watches it');
    await env.rt.runtime.call('RemoveContainer', { container_id: id });
    // Gone for every caller once RemoveContainer answers, and its host objects with it: the answer waits for
    // the cleanup (none is left pending to run beside the next calls).
    assert.deepEqual(await env.rt.pendingRemovals(), [], 'nothing left to clean up when RemoveContainer answers');
    assert.ok(!(await env.runcList()).includes(id));
    await assert.rejects(stat(dir), { code: 'ENOENT' });
    await assert.rejects(env.rt.runtime.call('ContainerStatus', { container_id: id }), grpcCode(grpc.status.NOT_FOUND));
    assert.ok(!(await env.rt.runtime.call('ListContainers', {})).containers.some((c) => c.id === id));
    await env.rt.runtime.call('RemoveContainer', { container_id: id });
    assert.deepEqual(await conmons(), [], 'its conmon is gone');
    assert.ok(!(await readFile('/proc/self/mounts', 'utf8')).includes(id), 'no mount names the container');
    await assert.rejects(env.rt.runtime.call('ContainerStatus', { container_id: id }), grpcCode(grpc.status.NOT_FOUND));
  });
});
