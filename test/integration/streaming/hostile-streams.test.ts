// Hostile streaming clients against the real daemon (#31): stdin floods over SPDY and WebSocket while
// the daemon's RSS is sampled, a port-forward session opening more stream pairs than its limit, a
// SPDY frame far over the frame limit, SPDY header bombs, and one container's sessions past its own limit. Each attack
// also checks the daemon keeps answering CRI calls (a liveness deadline) while it runs.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { containerConfig } from '../../support/pods.js';
import { rssBytes } from '../../support/rss.js';
import { streamingPod } from '../../support/streaming-pod.js';
import { channelText, readAll, spdyConnect, spdyExec, spdyRemoteCommand, UpgradeRefused, wsConnect } from '../../support/streaming-client.js';
import { waitFor } from '../../support/wait.js';
import { encodeData } from '../../../streaming/spdy-frames.js';
import type { SpdySession } from '../../../streaming/spdy.js';

/** The README's bound: the daemon's RSS grows by less than this during a 1 GiB stdin flood. */
const FLOOD_RSS_BOUND = 64 * 1024 * 1024;
const FLOOD_BYTES = 1024 * 1024 * 1024;
const PER_CONTAINER = 3;
const PAIRS = 4;
const HTTP_GET = 'GET / HTTP/1.0\r\nHost: pod\r\n\r\n';

describe('streaming under hostile clients', () => {
  const pod = streamingPod(87, 'hstream', 'the hostile streaming tests',
    `[streaming]\nmax_sessions_per_container = ${PER_CONTAINER}\nmax_port_forward_pairs = ${PAIRS}\n`);
  let shell: string; // httpd on 8080, then sleeps
  let other: string; // another container of the pod: sleeps

  const rt = () => pod.daemon.client.runtime;
  const execUrl = async (container: string, cmd: string[], stdin = false) =>
    (await rt().call('Exec', { container_id: container, cmd, stdin, stdout: true, stderr: true, tty: false })).url;

  /** The daemon keeps answering: Version, ListContainers and a short exec in the other container, within 10 s. */
  async function assertLive(during: string): Promise<void> {
    const started = Date.now();
    const live = (async () => {
      await rt().call('Version', {});
      await rt().call('ListContainers', {});
      const r = await spdyExec(await execUrl(other, ['echo', 'alive']));
      assert.equal(r.stdout, 'alive\n');
    })();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([live, new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`the daemon did not answer within 10 s during ${during}`)), 10_000); })]);
    clearTimeout(timer);
    assert.ok(Date.now() - started < 10_000);
  }

  before(async () => {
    shell = await pod.start(containerConfig('shell', pod.image, ['sh', '-c', 'httpd -p 8080 -h /www && exec sleep 3600']));
    other = await pod.start(containerConfig('other', pod.image, ['sleep', '3600']));
  });

  /**
   * Floods `write` with up to 1 GiB (one 64 KiB buffer over and over) while sampling the daemon's RSS,
   * until all is sent or the flow has stalled (back-pressure); checks liveness while it is stalled.
   */
  async function flood(what: string, write: (chunk: Buffer) => Promise<void>): Promise<{ sent: number; grown: number }> {
    const pid = pod.daemon.process.pid!;
    const base = rssBytes(pid);
    let peak = base;
    const sampler = setInterval(() => { peak = Math.max(peak, rssBytes(pid)); }, 50);
    const chunk = Buffer.alloc(64 * 1024, 0x5a);
    let sent = 0;
    let stop = false;
    const sending = (async () => {
      while (!stop && sent < FLOOD_BYTES) {
        await write(chunk);
        sent += chunk.length;
      }
    })();
    try {
      // Stalled: no progress for a second.
      for (let last = -1; sent !== last && sent < FLOOD_BYTES; await sleep(1000)) last = sent;
      await assertLive(what);
      peak = Math.max(peak, rssBytes(pid));
    } finally {
      clearInterval(sampler);
      stop = true;
    }
    void sending.catch(() => undefined);
    return { sent, grown: peak - base };
  }

  it('a 1 GiB stdin flood over SPDY into a process that never reads: RSS stays within the bound, the daemon answers', async () => {
    const s = await spdyRemoteCommand(await execUrl(shell, ['sleep', '3600'], true), { stdin: true, stdout: true, stderr: true });
    try {
      const r = await flood('a SPDY stdin flood', (c) => new Promise((resolve, reject) => s.stdin!.write(c, (err) => (err ? reject(err) : resolve()))));
      assert.ok(r.sent < FLOOD_BYTES, 'back-pressure held the client back');
      assert.ok(r.grown < FLOOD_RSS_BOUND, `the daemon's RSS grew by ${(r.grown / 1048576).toFixed(1)} MiB during the flood (${r.sent} bytes sent)`);
    } finally {
      s.conn.session.destroy();
    }
  });

  it('a 1 GiB stdin flood over WebSocket into a process that never reads: RSS stays within the bound, the daemon answers', async () => {
    const s = await wsConnect(await execUrl(shell, ['sleep', '3600'], true), ['v5.channel.k8s.io']);
    try {
      const r = await flood('a WebSocket stdin flood', (c) => new Promise((resolve, reject) => s.ws.send(Buffer.concat([Buffer.from([0]), c]), (err) => (err ? reject(err) : resolve()))));
      assert.ok(r.sent < FLOOD_BYTES, 'back-pressure held the client back');
      assert.ok(r.grown < FLOOD_RSS_BOUND, `the daemon's RSS grew by ${(r.grown / 1048576).toFixed(1)} MiB during the flood (${r.sent} bytes sent)`);
    } finally {
      s.ws.terminate();
      await s.closed;
    }
  });

  it('a port-forward session opening more pairs than its limit: refusals past it, the earlier pairs keep working', async () => {
    const { session } = await spdyConnect((await rt().call('PortForward', { pod_sandbox_id: pod.podId, port: [8080] })).url, ['portforward.k8s.io']);
    try {
      const pair = async (id: number) => ({
        error: await session.openStream({ streamtype: 'error', port: '8080', requestid: String(id) }),
        data: await session.openStream({ streamtype: 'data', port: '8080', requestid: String(id) }),
      });
      const held = [];
      for (let i = 0; i < PAIRS; i++) held.push(await pair(i));
      // Many more, as a hostile client would open: each refused, none reaching the pod.
      for (let i = PAIRS; i < PAIRS + 50; i++) {
        const error = await session.openStream({ streamtype: 'error', port: '8080', requestid: String(i) });
        assert.match(await readAll(error), new RegExp(`refused: this session has ${PAIRS} connections open: the limit is ${PAIRS} \\(config key streaming\\.max_port_forward_pairs\\)`));
        await assert.rejects(session.openStream({ streamtype: 'data', port: '8080', requestid: String(i) }), /closed before the peer accepted it/);
      }
      await assertLive('a port-forward pair flood');
      for (const p of held) {
        const body = readAll(p.data);
        p.data.end(HTTP_GET);
        assert.match(await body, /hello from the pod/);
      }
    } finally {
      session.destroy();
    }
  });

  it('a 16 MiB SPDY frame: refused from its header, the session closed with the reason on its error stream', async () => {
    const s = await spdyRemoteCommand(await execUrl(shell, ['sleep', '3600'], true), { stdin: true, stdout: true, stderr: true });
    const error = readAll(s.error);
    const frame = encodeData(s.stdin!.id, Buffer.alloc(16 * 1024 * 1024 - 1), false);
    s.conn.socket.write(frame);
    const status = JSON.parse(await error) as { status: string; message: string };
    assert.equal(status.status, 'Failure');
    assert.match(status.message, /a SPDY frame of 16777215 bytes was refused and the session closed: the limit is 1048576 \(config key streaming\.max_frame_bytes\)/);
    await waitFor(async () => s.conn.session.isClosed, 10_000, 'the session to close');
    await assertLive('a huge SPDY frame');
  });

  it('SPDY header bombs (~2 KB inflating to 2 MiB): each session closed, its slot given back; the pod still forwards', async () => {
    /** A port-forward session into the pod, retried while the slot of the one before is not given back yet (429). */
    const admitted = async (what: string): Promise<SpdySession> => {
      let session: SpdySession | undefined;
      await waitFor(async () => {
        try {
          session = (await spdyConnect((await rt().call('PortForward', { pod_sandbox_id: pod.podId, port: [8080] })).url, ['portforward.k8s.io'])).session;
          return true;
        } catch (err) {
          if (err instanceof UpgradeRefused && err.status === 429) return false;
          throw err;
        }
      }, 10_000, what);
      return session!;
    };
    // Twice the per-target cap: a session a bomb had stuck would keep its slot and the later ones get 429.
    for (let i = 0; i < 2 * PER_CONTAINER; i++) {
      const session = await admitted(`port-forward session ${i + 1} admitted`);
      void session.openStream({ streamtype: 'error', port: '8080', requestid: '1', x: 'a'.repeat(2 << 20) }).catch(() => undefined);
      await waitFor(async () => session.isClosed, 10_000, `bombed session ${i + 1} closed by the daemon`);
    }
    await assertLive('SPDY header bombs');
    const session = await admitted('a port-forward session after the bombs');
    try {
      await session.openStream({ streamtype: 'error', port: '8080', requestid: '1' });
      const data = await session.openStream({ streamtype: 'data', port: '8080', requestid: '1' });
      const body = readAll(data);
      data.end(HTTP_GET);
      assert.match(await body, /hello from the pod/);
    } finally {
      session.destroy();
    }
  });

  it('one container\'s sessions past its limit get 429 naming the key; another container still gets a session', async () => {
    const held: Awaited<ReturnType<typeof spdyRemoteCommand>>[] = [];
    try {
      // The earlier tests' sessions into this container end in the daemon a moment after their clients left.
      await waitFor(async () => {
        try {
          held.push(await spdyRemoteCommand(await execUrl(shell, ['sleep', '3600']), { stdout: true, stderr: true }));
        } catch (err) {
          if (!(err instanceof UpgradeRefused && err.status === 429)) throw err;
        }
        return held.length === PER_CONTAINER;
      }, 15_000, `${PER_CONTAINER} sessions into the container`);
      const url = await execUrl(shell, ['true']);
      await assert.rejects(spdyConnect(url, ['v4.channel.k8s.io']), (e: UpgradeRefused) => e.status === 429
        && new RegExp(`${PER_CONTAINER} streaming sessions are open to container ${shell}: the limit is ${PER_CONTAINER} \\(config key streaming\\.max_sessions_per_container\\)`).test(e.body));
      await assert.rejects(wsConnect(await execUrl(shell, ['true']), ['v5.channel.k8s.io']), (e: UpgradeRefused) => e.status === 429);
      // assertLive execs in the other container: its sessions are not held back by this one's.
      await assertLive('one container at its session limit');
      const ws = await wsConnect(await execUrl(other, ['echo', 'over websocket']), ['v5.channel.k8s.io']);
      await ws.closed;
      assert.equal(channelText(ws, 1), 'over websocket\n');
    } finally {
      for (const h of held) h.conn.session.destroy();
    }
    // Freed: the container gets sessions again.
    await waitFor(async () => {
      try {
        return (await spdyExec(await execUrl(shell, ['echo', 'back']))).stdout === 'back\n';
      } catch (err) {
        if (err instanceof UpgradeRefused && err.status === 429) return false;
        throw err;
      }
    }, 10_000, 'a session for the container once the others ended');
  });
});
