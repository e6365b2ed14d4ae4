// A pod's port mapping answering on the host's loopback, and containers living through a daemon
// restart: still running, or exited while the daemon was down with their exit code kept.
import assert from 'node:assert/strict';
import { readFile, rename, stat, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ContainerEnv, sleep } from './env.js';

/** A TCP port nothing listens on right now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

async function fetchText(url: string, ms = 10_000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      return await res.text();
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${url} did not answer within ${ms} ms`, { cause: err });
      await sleep(100);
    }
  }
}

describe('container networking and daemon restarts', () => {
  let env: ContainerEnv;
  before(async () => { env = await ContainerEnv.start(72); });
  after(() => env.stop());

  it('answers on 127.0.0.1:hostPort from a busybox httpd in the pod', async (t) => {
    const hostPort = await freePort();
    const pod = await env.runPod(t, 'web', (c) => { c.port_mappings = [{ protocol: 'TCP', container_port: 8080, host_port: hostPort }]; });
    await env.run(pod, 'httpd', ['sh', '-c', 'mkdir -p /www && echo "hello from the pod" > /www/index.html && exec httpd -f -p 8080 -h /www']);
    const ip = (await env.rt.runtime.call('PodSandboxStatus', { pod_sandbox_id: pod.id })).status!.network!.ip;
    assert.equal(await fetchText(`http://${ip}:8080/`), 'hello from the pod\n', 'the host reaches the pod over the bridge');
    assert.equal(await fetchText(`http://127.0.0.1:${hostPort}/`), 'hello from the pod\n', 'the host port forwards to the pod');
    // Removing the pod takes its port mapping with it.
    await env.rt.runtime.call('RemovePodSandbox', { pod_sandbox_id: pod.id });
    await assert.rejects(fetch(`http://127.0.0.1:${hostPort}/`, { signal: AbortSignal.timeout(2000) }));
  });

  it('keeps containers across a daemon restart, and sees the exit of one that ended meanwhile', async (t) => {
    const pod = await env.runPod(t, 'restart');
    const sleeper = await env.run(pod, 'sleeper', ['sleep', '1000']);
    // Exits once the test says so, which is while the daemon is down.
    const quitter = await env.run(pod, 'quitter', ['sh', '-c', 'while [ ! -e /tmp/quit ]; do sleep 0.1; done; exit 7']);
    const waiting = await env.create(pod, 'waiting', ['sh', '-c', 'echo started late']);
    const { pid: before } = JSON.parse((await env.rt.runtime.call('ContainerStatus', { container_id: sleeper, verbose: true })).info.info!) as { pid: number };
    const quitterPid = JSON.parse((await env.rt.runtime.call('ContainerStatus', { container_id: quitter, verbose: true })).info.info!).pid as number;
    await env.restartDaemon(async () => {
      // Through /proc/<pid>/root the file lands in the container's own filesystem.
      await writeFile(`/proc/${quitterPid}/root/tmp/quit`, '');
      for (const deadline = Date.now() + 10_000; await stat(`/proc/${quitterPid}`).then(() => true, () => false);) {
        assert.ok(Date.now() < deadline, 'the quitter exits while the daemon is down');
        await sleep(50);
      }
    });
    const s = await env.status(sleeper);
    assert.equal(s.state, 'CONTAINER_RUNNING');
    const { pid: after } = JSON.parse((await env.rt.runtime.call('ContainerStatus', { container_id: sleeper, verbose: true })).info.info!) as { pid: number };
    assert.equal(after, before, 'the same process');
    assert.equal((await env.exec(sleeper, 'echo still here')).stdout, 'still here\n');
    const q = await env.status(quitter);
    assert.equal(q.state, 'CONTAINER_EXITED');
    assert.equal(q.exit_code, 7);
    assert.equal(q.reason, 'Error');
    // A container created before the restart starts after it, and a running one's log can still be reopened.
    assert.equal((await env.status(waiting)).state, 'CONTAINER_CREATED');
    await env.rt.runtime.call('StartContainer', { container_id: waiting });
    const w = await env.waitExited(waiting);
    assert.equal(w.exit_code, 0);
    assert.match(await readFile(w.log_path, 'utf8'), /stdout F started late\n$/);
    await rename(s.log_path, `${s.log_path}.1`);
    await env.rt.runtime.call('ReopenContainerLog', { container_id: sleeper });
    await stat(s.log_path);
    await env.rt.runtime.call('StopContainer', { container_id: sleeper, timeout: 0 });
    assert.equal((await env.status(sleeper)).exit_code, 137);
  });
});
