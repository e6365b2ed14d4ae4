// Exec, attach and port-forward end to end: the real daemon on a private CNI network, a busybox image
// pulled from a local registry, real containers under conmon and runc, and clients speaking SPDY/3.1
// (our codec in client mode) and WebSocket (`ws`).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import { waitFor } from '../../support/cni-env.js';
import { startFakeApiServer } from '../../support/fake-apiserver.js';
import { containerConfig } from '../../support/pods.js';
import { streamingPod } from '../../support/streaming-pod.js';
import {
  channelText, readAll, readUntil, spdyConnect, spdyExec, spdyRemoteCommand, UpgradeRefused, wsConnect, wsSend,
} from '../../support/streaming-client.js';

/**
 * The kubectls the interop test drives: the one on PATH (Debian's kubernetes-client, which setup.sh installs:
 * 1.20), one named by MINICRI_TEST_KUBECTL, and Google Cloud SDK's versioned ones where that is installed (its
 * /usr/bin/kubectl is a dispatcher picking a version itself, so the versioned binaries are used instead).
 * Before 1.30 kubectl speaks SPDY for exec; from 1.30 WebSocket v5 (and tunnels port-forward, falling back to SPDY).
 */
const KUBECTLS = findKubectls();

function findKubectls(): { v: string; minor: number; path: string }[] {
  const onPath = (() => { try { return execFileSync('sh', ['-c', 'command -v kubectl'], { encoding: 'utf8' }).trim(); } catch { return ''; } })();
  const candidates = [
    process.env.MINICRI_TEST_KUBECTL ?? '',
    onPath !== '' && !realpathSync(onPath).includes('google-cloud-sdk') ? onPath : '',
    ...['1.29', '1.33'].map((v) => `/usr/lib/google-cloud-sdk/bin/kubectl.${v}`),
  ].filter((p) => p !== '' && existsSync(p));
  const found = new Map<string, { v: string; minor: number; path: string }>();
  for (const path of candidates) {
    const out = JSON.parse(execFileSync(path, ['version', '--client', '-o', 'json'], { encoding: 'utf8' })) as { clientVersion: { major: string; minor: string } };
    const minor = Number.parseInt(out.clientVersion.minor, 10);
    found.set(realpathSync(path), { v: `${out.clientVersion.major}.${minor}`, minor, path });
  }
  return [...found.values()];
}

const HTTP_GET = 'GET / HTTP/1.0\r\nHost: pod\r\n\r\n';

describe('streaming: exec, attach, port-forward', () => {
  const pod = streamingPod(80, 'stream', 'the streaming tests');
  let shell: string; // runs httpd on 8080 and 8081, then sleeps
  let catter: string; // cat on its stdin

  const rt = () => pod.daemon.client.runtime;
  const execUrl = async (cmd: string[], o: { stdin?: boolean; tty?: boolean; stderr?: boolean } = {}) =>
    (await rt().call('Exec', { container_id: shell, cmd, stdin: o.stdin ?? false, stdout: true, stderr: o.stderr ?? !o.tty, tty: o.tty ?? false })).url;

  before(async () => {
    shell = await pod.start(containerConfig('shell', pod.image, ['sh', '-c', 'httpd -p 8080 -h /www && httpd -p 8081 -h /www && exec sleep 3600']));
    catter = await pod.start(containerConfig('cat', pod.image, ['cat'], (c) => { c.stdin = true; }));
  });

  it('serves on loopback only by default and answers with a /<verb>/<token> URL', async () => {
    const url = new URL(await execUrl(['true']));
    assert.equal(url.hostname, '127.0.0.1');
    assert.match(url.pathname, /^\/exec\/[A-Za-z0-9_-]{22}$/);
    // Nothing of ours listens on a wildcard or non-loopback address.
    const { stdout } = await execa('ss', ['-Hltnp']);
    const ours = stdout.split('\n').filter((l) => l.includes(`pid=${pod.daemon.process.pid},`));
    assert.ok(ours.length > 0);
    for (const line of ours) assert.match(line.split(/\s+/)[3]!, /^127\.0\.0\.1:\d+$/);
  });

  it('exec: echo returns its output and exit 0 (Success status)', async () => {
    const r = await spdyExec(await execUrl(['echo', 'hello', 'world']));
    assert.equal(r.stdout, 'hello world\n');
    assert.equal(r.stderr, '');
    assert.equal(JSON.parse(r.error).status, 'Success');
  });

  it('exec: a command exiting 3 reports exit code 3 through the Status, stderr apart', async () => {
    const r = await spdyExec(await execUrl(['sh', '-c', 'echo oops >&2; exit 3']));
    assert.equal(r.stderr, 'oops\n');
    const status = JSON.parse(r.error);
    assert.equal(status.status, 'Failure');
    assert.equal(status.reason, 'NonZeroExitCode');
    assert.deepEqual(status.details.causes, [{ reason: 'ExitCode', message: '3' }]);
  });

  it('exec: stdin piped to cat comes back; older protocols work too', async () => {
    const data = 'line one\nline two\n'.repeat(2000);
    const r = await spdyExec(await execUrl(['cat'], { stdin: true }), { stdin: data });
    assert.equal(r.stdout.length, data.length);
    assert.equal(r.stdout, data);
    const v2 = await spdyExec(await execUrl(['sh', '-c', 'exit 4']), { protocols: ['v2.channel.k8s.io'] });
    assert.match(v2.error, /non-zero exit code/);
  });

  it('exec with a tty: gets a terminal, and resizes change its size', async () => {
    const s = await spdyRemoteCommand(await execUrl(['sh'], { stdin: true, tty: true }), { stdin: true, stdout: true, tty: true });
    try {
      const error = readAll(s.error);
      s.resize!.write(JSON.stringify({ Width: 100, Height: 40 }));
      await sleep(300);
      s.stdin!.write('tty; stty size\n');
      const first = await readUntil(s.stdout!, /\d+ \d+\r?\n/);
      assert.match(first, /\/dev\/pts\/\d+/);
      assert.match(first, /40 100/);
      s.resize!.write(JSON.stringify({ Width: 132, Height: 50 }));
      await sleep(300);
      s.stdin!.write('stty size; exit 0\n');
      assert.match(await readUntil(s.stdout!, /50 132/), /50 132/);
      assert.equal(JSON.parse(await error).status, 'Success');
    } finally {
      s.conn.session.destroy();
    }
  });

  it('exec over WebSocket v5: output, exit code and stdin closed with the close channel', async () => {
    const s = await wsConnect(await execUrl(['sh', '-c', 'cat; exit 5'], { stdin: true }), ['v5.channel.k8s.io', 'v4.channel.k8s.io']);
    assert.equal(s.protocol, 'v5.channel.k8s.io');
    wsSend(s, 0, 'through websocket\n');
    s.ws.send(Buffer.from([255, 0]));
    await s.closed;
    assert.equal(channelText(s, 1), 'through websocket\n');
    const status = JSON.parse(channelText(s, 3));
    assert.deepEqual(status.details.causes, [{ reason: 'ExitCode', message: '5' }]);
  });

  it('attach: to a container running cat with stdin, input echoes; detaching leaves it running', async () => {
    const { url } = await rt().call('Attach', { container_id: catter, stdin: true, stdout: true, stderr: true, tty: false });
    const s = await spdyRemoteCommand(url, { stdin: true, stdout: true, stderr: true });
    s.stdin!.write('ping over attach\n');
    assert.match(await readUntil(s.stdout!, /ping over attach\n/), /ping over attach/);
    s.conn.session.destroy();
    await sleep(500);
    assert.equal((await rt().call('ContainerStatus', { container_id: catter })).status!.state, 'CONTAINER_RUNNING');
    // A second attach works the same: the first one's going away did not close cat's stdin.
    const again = await wsConnect((await rt().call('Attach', { container_id: catter, stdin: true, stdout: true, stderr: false, tty: false })).url, ['v4.channel.k8s.io']);
    wsSend(again, 0, 'second\n');
    await waitFor(async () => channelText(again, 1).includes('second\n'), 5000, 'the echo of the second attach');
    again.ws.close();
    await again.closed;
  });

  it('attach with stdin_once: closing stdin ends cat and the container; with a tty, resizes reach the terminal', async () => {
    const once = await pod.start(containerConfig('once', pod.image, ['cat'], (c) => { c.stdin = true; c.stdin_once = true; }));
    const tty = await pod.start(containerConfig('tty', pod.image, ['sh'], (c) => { c.stdin = true; c.tty = true; }));
    try {
      const s = await spdyRemoteCommand((await rt().call('Attach', { container_id: once, stdin: true, stdout: true, stderr: true })).url, { stdin: true, stdout: true, stderr: true });
      const out = readAll(s.stdout!);
      const error = readAll(s.error);
      s.stdin!.end('last words\n');
      assert.equal(await out, 'last words\n');
      assert.equal(JSON.parse(await error).status, 'Success');
      await waitFor(async () => (await rt().call('ContainerStatus', { container_id: once })).status!.state === 'CONTAINER_EXITED', 5000, 'cat to exit');

      const t = await spdyRemoteCommand((await rt().call('Attach', { container_id: tty, stdin: true, stdout: true, tty: true })).url, { stdin: true, stdout: true, tty: true });
      t.resize!.write(JSON.stringify({ Width: 91, Height: 31 }));
      await sleep(300);
      t.stdin!.write('stty size\n');
      assert.match(await readUntil(t.stdout!, /31 91/), /31 91/);
      t.conn.session.destroy();
    } finally {
      for (const id of [once, tty]) await rt().call('RemoveContainer', { container_id: id });
    }
  });

  it('port-forward over SPDY: two requests on one session, two ports, a failed port does not break the others', async () => {
    const { url } = await rt().call('PortForward', { pod_sandbox_id: pod.podId, port: [8080, 8081] });
    const { session } = await spdyConnect(url, ['portforward.k8s.io']);
    try {
      let request = 0;
      const fetchVia = async (port: number) => {
        const id = String(request++);
        const error = await session.openStream({ streamtype: 'error', port: String(port), requestid: id });
        const data = await session.openStream({ streamtype: 'data', port: String(port), requestid: id });
        const [body, err] = [readAll(data), readAll(error)];
        data.end(HTTP_GET);
        return { body: await body, err: await err };
      };
      for (const port of [8080, 8080, 8081]) {
        const r = await fetchVia(port);
        assert.match(r.body, /^HTTP\/1\.[01] 200/);
        assert.match(r.body, /hello from the pod/);
        assert.equal(r.err, '');
      }
      const bad = await fetchVia(9);
      assert.match(bad.err, /port 9.*(refused|connect)/i);
      const afterBad = await fetchVia(8081);
      assert.match(afterBad.body, /hello from the pod/);
    } finally {
      session.destroy();
    }
  });

  it('port-forward over WebSocket: port-prefixed channel pair per port', async () => {
    const { url } = await rt().call('PortForward', { pod_sandbox_id: pod.podId, port: [] });
    const s = await wsConnect(`${url}?port=8081`, ['v4.channel.k8s.io']);
    try {
      await waitFor(async () => (s.channels.get(0)?.length ?? 0) >= 1 && (s.channels.get(1)?.length ?? 0) >= 1, 5000, 'the port prefixes');
      assert.deepEqual([...s.channels.get(0)![0]!], [0x91, 0x1f]);
      wsSend(s, 0, HTTP_GET);
      await waitFor(async () => /hello from the pod/.test(channelText(s, 0)), 5000, 'the page');
    } finally {
      s.ws.close();
      await s.closed;
    }
  });

  it('tokens: a used one and a made-up one get 404; a plain GET is refused without using it', async () => {
    const url = await execUrl(['true']);
    const plain = await fetch(url);
    assert.equal(plain.status, 400);
    await plain.text();
    const r = await spdyExec(url);
    assert.equal(JSON.parse(r.error).status, 'Success');
    await assert.rejects(spdyConnect(url, ['v4.channel.k8s.io']), (e: UpgradeRefused) => e.status === 404);
    const madeUp = url.replace(/\/exec\/.*/, '/exec/AAAAAAAAAAAAAAAAAAAAAA');
    await assert.rejects(spdyConnect(madeUp, ['v4.channel.k8s.io']), (e: UpgradeRefused) => e.status === 404);
    await assert.rejects(wsConnect(madeUp, ['v4.channel.k8s.io']), (e: UpgradeRefused) => e.status === 404);
    const other = await new Promise<number>((resolve, reject) => request(url.replace(/\/exec\/.*/, '/metrics')).on('response', (res) => { res.resume(); resolve(res.statusCode!); }).on('error', reject).end());
    assert.equal(other, 404);
  });

  it('a client that disconnects mid-exec leaves no exec process behind', async () => {
    const marker = String(3000 + Math.floor(Math.random() * 900));
    const s = await spdyRemoteCommand(await execUrl(['sleep', marker]), { stdout: true, stderr: true });
    await waitFor(async () => (await execa('pgrep', ['-f', `^sleep ${marker}$`], { reject: false })).exitCode === 0, 5000, 'the exec process');
    s.conn.socket.destroy();
    await waitFor(async () => (await execa('pgrep', ['-f', `^sleep ${marker}$`], { reject: false })).exitCode === 1, 5000, 'the exec process to be killed');
  });

  it('refuses bad requests: no command, no stream, tty with stderr, unknown ids', async () => {
    const code = (c: grpc.status) => (err: grpc.ServiceError) => err.code === c;
    await assert.rejects(rt().call('Exec', { container_id: shell, cmd: [], stdout: true }), code(grpc.status.INVALID_ARGUMENT));
    await assert.rejects(rt().call('Exec', { container_id: shell, cmd: ['true'] }), code(grpc.status.INVALID_ARGUMENT));
    await assert.rejects(rt().call('Exec', { container_id: shell, cmd: ['true'], stdout: true, stderr: true, tty: true }), code(grpc.status.INVALID_ARGUMENT));
    await assert.rejects(rt().call('Exec', { container_id: 'f'.repeat(64), cmd: ['true'], stdout: true }), code(grpc.status.NOT_FOUND));
    await assert.rejects(rt().call('Attach', { container_id: 'f'.repeat(64), stdout: true }), code(grpc.status.NOT_FOUND));
    await assert.rejects(rt().call('Attach', { container_id: shell, stdin: true, stdout: true }), code(grpc.status.INVALID_ARGUMENT));
    await assert.rejects(rt().call('PortForward', { pod_sandbox_id: 'f'.repeat(64), port: [80] }), code(grpc.status.NOT_FOUND));
    await assert.rejects(rt().call('PortForward', { pod_sandbox_id: pod.podId, port: [70000] }), code(grpc.status.INVALID_ARGUMENT));
  });

  it('has a kubectl to drive (setup.sh test installs Debian\'s kubernetes-client)', () => {
    assert.ok(KUBECTLS.length > 0, 'no kubectl found: install kubernetes-client (apt) or name one in MINICRI_TEST_KUBECTL');
  });

  for (const kubectl of KUBECTLS) {
    it(`kubectl ${kubectl.v} (the Go clients) through a fake API server: exec exit codes, stdin, port-forward`, async () => {
      const ids: Record<string, string> = { shell, cat: catter };
      const api = await startFakeApiServer('stream', ['shell', 'cat'], async (sub, q) => {
        const flag = (k: string) => q.get(k) === 'true';
        if (sub === 'portforward') return (await rt().call('PortForward', { pod_sandbox_id: pod.podId, port: [] })).url;
        const common = { container_id: ids[q.get('container') ?? 'shell']!, stdin: flag('stdin'), stdout: flag('stdout'), stderr: flag('stderr'), tty: flag('tty') };
        if (sub === 'exec') return (await rt().call('Exec', { ...common, cmd: q.getAll('command') })).url;
        return (await rt().call('Attach', common)).url;
      });
      const home = await mkdtemp(join(tmpdir(), 'minicri-streaming-kubectl-'));
      let forward: ReturnType<typeof execa> | undefined;
      try {
        const kubeconfig = await api.writeKubeconfig(join(home, 'kubeconfig'));
        const run = (args: string[], input?: string) => execa(kubectl.path, ['--kubeconfig', kubeconfig, '--cache-dir', join(home, 'cache'), ...args],
          { reject: false, timeout: 30_000, env: { HOME: home }, ...(input === undefined ? {} : { input }) });
        const logStart = pod.daemon.log().length;
        const failing = await run(['exec', 'stream', '-c', 'shell', '--', 'sh', '-c', 'echo out; echo err >&2; exit 3']);
        assert.equal(failing.stdout, 'out');
        assert.match(failing.stderr, /err/);
        assert.equal(failing.exitCode, 3, failing.stderr);
        // Well past SPDY's 64 KiB initial window: neither side may wait for window updates.
        const big = `${'0123456789abcdef'.repeat(64 * 1024)}end`;
        const piped = await run(['exec', '-i', 'stream', '-c', 'shell', '--', 'cat'], big);
        assert.equal(piped.exitCode, 0, piped.stderr);
        assert.equal(piped.stdout.length, big.length);
        assert.ok(piped.stdout === big);

        forward = execa(kubectl.path, ['--kubeconfig', kubeconfig, '--cache-dir', join(home, 'cache'), 'port-forward', 'pod/stream', ':8080', ':8081'],
          { env: { HOME: home, KUBECTL_PORT_FORWARD_WEBSOCKETS: 'true' }, reject: false });
        const local = await readUntil(forward.stdout!, /Forwarding from 127\.0\.0\.1:\d+ -> 8081/);
        const ports = [...local.matchAll(/127\.0\.0\.1:(\d+) -> (\d+)/g)].map((m) => m[1]);
        for (const port of [ports[0], ports[0], ports[1]]) {
          const res = await fetch(`http://127.0.0.1:${port}/`);
          assert.match(await res.text(), /hello from the pod/);
        }
        forward.kill('SIGTERM');
        await forward.catch(() => undefined);
        // Each kubectl spoke what we expect of its version (before 1.30: SPDY; after: WebSocket, SPDY tunneled for port-forward).
        const expected = kubectl.minor < 30 ? ['exec spdy', 'portforward spdy portforward.k8s.io'] : ['exec ws v5.channel.k8s.io', 'portforward ws SPDY/3.1+portforward.k8s.io'];
        const spoken = () => pod.daemon.log().slice(logStart).split('\n').filter((l) => l.includes('streaming session ended'))
          .map((l) => JSON.parse(l) as { verb: string; transport: string; protocol: string }).map((l) => `${l.verb} ${l.transport} ${l.protocol}`);
        await waitFor(async () => expected.every((e) => spoken().some((x) => x.startsWith(e))), 5000, `sessions ${expected.join(', ')} (saw ${spoken().join('; ')})`);
      } finally {
        forward?.kill('SIGTERM');
        await forward?.catch(() => undefined);
        await api.close();
        await rm(home, { recursive: true, force: true });
      }
    });
  }
});
