// The streaming server against a stub backend: limits, idle timeouts, shutdown, URLs, back-pressure.
import assert from 'node:assert/strict';
import { spawn, type Subprocess } from '../../../core/spawn.js';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { silentLogger } from '../../../core/log.js';
import type { StreamingLimits } from '../../../streaming/limits.js';
import { encodeData } from '../../../streaming/spdy-frames.js';
import { StreamingServer, type StreamingBackend, type StreamRequest } from '../../../streaming/server.js';
import { readAll, spdyConnect, spdyExec, spdyRemoteCommand, UpgradeRefused, wsConnect, wsSend } from '../../support/streaming-client.js';

/** `echo` writes its arguments; `hang` runs until the client goes away. */
const backend: StreamingBackend = {
  exec: async (req, io) => {
    if (req.cmd[0] === 'echo') {
      io.stdout?.write(req.cmd.slice(1).join(' '));
      return 0;
    }
    await once(io.signal, 'abort');
    return 137;
  },
  attach: async () => undefined,
  portForward: async () => { throw new Error('not in these tests'); },
};

const exec = (cmd: string[]): Extract<StreamRequest, { verb: 'exec' }> => ({ verb: 'exec', containerId: 'c1', cmd, stdin: false, stdout: true, stderr: false, tty: false });

async function withServer(o: { maxSessions?: number; idleTimeoutMs?: number; limits?: Partial<StreamingLimits>; backend?: StreamingBackend }, fn: (s: StreamingServer) => Promise<void>): Promise<void> {
  const s = await StreamingServer.start({
    address: '127.0.0.1', port: 0, idleTimeoutMs: o.idleTimeoutMs ?? 60_000, limits: { maxSessions: o.maxSessions ?? 10, ...o.limits }, backend: o.backend ?? backend, log: silentLogger,
  });
  try {
    await fn(s);
  } finally {
    await s.stop();
  }
}

describe('streaming server', () => {
  it('answers URLs on its loopback address and runs a session', async () => {
    await withServer({}, async (s) => {
      const url = s.url(exec(['echo', 'hi']));
      assert.match(url, new RegExp(`^http://127\\.0\\.0\\.1:${s.address.port}/exec/[A-Za-z0-9_-]{22}$`));
      const r = await spdyExec(url, { stderr: false });
      assert.equal(r.stdout, 'hi');
      assert.equal(JSON.parse(r.error).status, 'Success');
    });
  });

  it('refuses sessions past the limit with 429 and keeps the token for a retry', async () => {
    await withServer({ maxSessions: 1 }, async (s) => {
      const first = await spdyRemoteCommand(s.url(exec(['hang'])), { stdout: true });
      const url = s.url(exec(['echo', 'later']));
      await assert.rejects(spdyExec(url, { stderr: false }), (e: UpgradeRefused) => e.status === 429 && /limit is 1/.test(e.body));
      first.conn.session.destroy();
      for (let i = 0; s.activeSessions > 0 && i < 100; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal((await spdyExec(url, { stderr: false })).stdout, 'later');
    });
  });

  it('closes idle sessions, which ends their processes', async () => {
    await withServer({ idleTimeoutMs: 200 }, async (s) => {
      const session = await spdyRemoteCommand(s.url(exec(['hang'])), { stdout: true });
      // `hang` never ends by itself: the stream ends because the session was idle.
      await readAll(session.stdout!);
      for (let i = 0; s.activeSessions > 0 && i < 100; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(s.activeSessions, 0);
    });
  });

  it('ends open sessions when stopped', async () => {
    const s = await StreamingServer.start({ address: '127.0.0.1', port: 0, idleTimeoutMs: 60_000, limits: { maxSessions: 10 }, backend, log: silentLogger });
    const session = await spdyRemoteCommand(s.url(exec(['hang'])), { stdout: true });
    const closed = once(session.conn.session, 'close');
    await s.stop();
    await closed;
  });

  it('refuses an unsupported protocol with 403 without using the token', async () => {
    await withServer({}, async (s) => {
      const url = s.url(exec(['echo', 'ok']));
      await assert.rejects(spdyExec(url, { stderr: false, protocols: ['v9.channel.k8s.io'] }), (e: UpgradeRefused) => e.status === 403);
      assert.equal((await spdyExec(url, { stderr: false })).stdout, 'ok');
    });
  });

  it('refuses a container\'s sessions past its own limit with 429 naming the key, while another container still gets one', async () => {
    await withServer({ limits: { maxSessionsPerTarget: 2 } }, async (s) => {
      const held = [await spdyRemoteCommand(s.url(exec(['hang'])), { stdout: true }), await spdyRemoteCommand(s.url(exec(['hang'])), { stdout: true })];
      await assert.rejects(spdyExec(s.url(exec(['echo', 'x'])), { stderr: false }),
        (e: UpgradeRefused) => e.status === 429 && /2 streaming sessions are open to container c1: the limit is 2 \(config key streaming\.max_sessions_per_container\)/.test(e.body));
      await assert.rejects(wsConnect(s.url(exec(['echo', 'x'])), ['v4.channel.k8s.io']), (e: UpgradeRefused) => e.status === 429);
      const other = await spdyExec(s.url({ ...exec(['echo', 'other']), containerId: 'c2' }), { stderr: false });
      assert.equal(other.stdout, 'other');
      for (const h of held) h.conn.session.destroy();
      await waitUntil(() => s.activeSessions === 0);
      assert.equal((await spdyExec(s.url(exec(['echo', 'again'])), { stderr: false })).stdout, 'again');
    });
  });

  for (const transport of ['spdy', 'ws'] as const) {
    it(`stdin over ${transport}: a process not reading pauses the client; once it reads, every byte arrives in order`, async () => {
      const stdin = readerGate();
      await withServer({ backend: { ...backend, exec: stdin.exec }, limits: { inputBufferBytes: 256 * 1024 } }, async (s) => {
        const url = s.url({ ...exec(['take']), stdin: true });
        const flood = transport === 'spdy' ? await spdyFlood(url) : await wsFlood(url);
        // Far more than the buffer and the kernel's socket buffers: the flood must stall well short of it.
        const total = 256 * 1024 * 1024;
        const sending = flood.send(total);
        await stalled(() => flood.accepted());
        assert.ok(flood.accepted() < 48 * 1024 * 1024, `the client got ${flood.accepted()} bytes out with nobody reading`);
        const hash = stdin.read();
        await sending;
        flood.end();
        assert.equal(await hash, expectedHash(total));
        flood.close();
      });
    });
  }

  it('closes a SPDY session on a frame over the limit, saying why on the error stream', async () => {
    await withServer({ limits: { maxFrameBytes: 64 * 1024 } }, async (s) => {
      const r = await spdyRemoteCommand(s.url({ ...exec(['hang']), stdin: true }), { stdin: true, stdout: true });
      const error = readAll(r.error);
      r.conn.socket.write(encodeData(r.stdin!.id, Buffer.alloc(1024 * 1024), false));
      const status = JSON.parse(await error) as { status: string; message: string };
      assert.equal(status.status, 'Failure');
      assert.match(status.message, /a SPDY frame of 1048576 bytes was refused.*limit is 65536 \(config key streaming\.max_frame_bytes\)/);
      await waitUntil(() => s.activeSessions === 0);
    });
  });

  it('closes a SPDY exec session whose header block inflates past the cap, saying why, and gives its slot back', async () => {
    await withServer({ maxSessions: 1 }, async (s) => {
      const r = await spdyRemoteCommand(s.url(exec(['hang'])), { stdout: true });
      const error = readAll(r.error);
      // ~2 KB on the wire, 2 MiB inflated (the client's deflate shares the server's context, as SPDY wants).
      void r.conn.session.openStream({ streamtype: 'stdin', x: 'a'.repeat(2 << 20) }).catch(() => undefined);
      const status = JSON.parse(await error) as { status: string; message: string };
      assert.equal(status.status, 'Failure');
      assert.match(status.message, /header block expands past the limit of 65536 bytes/);
      await waitUntil(() => s.activeSessions === 0);
      assert.equal((await spdyExec(s.url(exec(['echo', 'next'])), { stderr: false })).stdout, 'next');
    });
  });

  it('a port-forward session sent a header bomb ends and a new one is admitted where the cap is 1', async () => {
    await withServer({ maxSessions: 1, backend: { ...backend, portForward: async () => () => spawn('cat', [], { stdio: ['pipe', 'pipe', 'pipe'] }) } }, async (s) => {
      const pf = () => s.url({ verb: 'portforward', sandboxId: 'p1', ports: [] });
      const { session } = await spdyConnect(pf(), ['portforward.k8s.io']);
      const closed = once(session, 'close');
      void session.openStream({ streamtype: 'error', port: '80', requestid: '1', x: 'a'.repeat(2 << 20) }).catch(() => undefined);
      await closed;
      await waitUntil(() => s.activeSessions === 0);
      const next = await spdyConnect(pf(), ['portforward.k8s.io']);
      assert.equal(s.activeSessions, 1);
      next.session.destroy();
      await waitUntil(() => s.activeSessions === 0);
    });
  });

  it('hands a session only the newest of 10,000 resizes the client sent in one message', async () => {
    const seen: Array<{ width: number; height: number }> = [];
    const resizing: StreamingBackend = {
      ...backend,
      exec: async (_req, io) => {
        io.resize.follow((size) => seen.push(size));
        await once(io.signal, 'abort');
        return 137;
      },
    };
    await withServer({ backend: resizing }, async (s) => {
      const ws = await wsConnect(s.url({ ...exec(['hang']), tty: true }), ['v5.channel.k8s.io']);
      const flood = Array.from({ length: 10_000 }, (_, i) => JSON.stringify({ Width: i + 1, Height: 1 })).join('');
      wsSend(ws, 4, flood);
      await waitUntil(() => seen.length > 0);
      // A later message still gets through.
      wsSend(ws, 4, JSON.stringify({ Width: 80, Height: 24 }));
      await waitUntil(() => seen.length > 1);
      assert.deepEqual(seen, [{ width: 10_000, height: 1 }, { width: 80, height: 24 }]);
      ws.ws.close();
      await waitUntil(() => s.activeSessions === 0);
    });
  });

  it('closes a WebSocket sending a message over the limit with 1009', async () => {
    await withServer({ limits: { maxFrameBytes: 64 * 1024 } }, async (s) => {
      const ws = await wsConnect(s.url({ ...exec(['hang']), stdin: true }), ['v5.channel.k8s.io']);
      ws.ws.send(Buffer.alloc(1024 * 1024));
      const [code] = await once(ws.ws, 'close') as [number];
      assert.equal(code, 1009);
      await waitUntil(() => s.activeSessions === 0);
    });
  });

  for (const transport of ['spdy', 'ws'] as const) {
    it(`a client that hangs up while its connection is paused (${transport}) is noticed and its session ends`, async () => {
      const stdin = readerGate();
      await withServer({ backend: { ...backend, exec: stdin.exec }, limits: { inputBufferBytes: 64 * 1024 } }, async (s) => {
        const url = s.url({ ...exec(['take']), stdin: true });
        const flood = transport === 'spdy' ? await spdyFlood(url) : await wsFlood(url);
        void flood.send(64 * 1024 * 1024).catch(() => undefined);
        await stalled(() => flood.accepted());
        assert.equal(s.activeSessions, 1);
        flood.close();
        // The paused socket is not read, so only the probes (every 2 s) can find the client gone.
        await waitUntil(() => s.activeSessions === 0, 15_000);
      });
    });
  }

  it('port-forward over SPDY: pairs past the limit are refused with a message, the earlier ones keep working', async () => {
    const children = new Set<Subprocess>();
    const connectCat = () => { const c = spawn('cat', [], { stdio: ['pipe', 'pipe', 'pipe'] }); children.add(c); c.once('close', () => children.delete(c)); return c; };
    await withServer({ backend: { ...backend, portForward: async () => connectCat }, limits: { maxPortForwardPairs: 2 } }, async (s) => {
      const { session } = await spdyConnect(s.url({ verb: 'portforward', sandboxId: 'p1', ports: [] }), ['portforward.k8s.io']);
      const pair = async (id: string) => ({
        error: await session.openStream({ streamtype: 'error', port: '80', requestid: id }),
        data: await session.openStream({ streamtype: 'data', port: '80', requestid: id }),
      });
      const first = await pair('1');
      const second = await pair('2');
      const refusedError = await session.openStream({ streamtype: 'error', port: '80', requestid: '3' });
      assert.match(await readAll(refusedError), /port-forward to port 80 refused: this session has 2 connections open: the limit is 2 \(config key streaming\.max_port_forward_pairs\)/);
      await assert.rejects(session.openStream({ streamtype: 'data', port: '80', requestid: '3' }), /closed before the peer accepted it/);
      assert.equal(children.size, 2);
      for (const p of [first, second]) {
        p.data.write('still here\n');
        assert.equal((await onceData(p.data)).toString(), 'still here\n');
      }
      first.data.end();
      await readAll(first.data);
      await waitUntil(() => children.size === 1);
      const third = await pair('4');
      third.data.write('room again\n');
      assert.equal((await onceData(third.data)).toString(), 'room again\n');
      session.destroy();
      await waitUntil(() => children.size === 0);
    });
  });

  it('port-forward over WebSocket: more ports than the limit close it with 1008 and the reason', async () => {
    await withServer({ backend: { ...backend, portForward: async () => () => spawn('cat', [], { stdio: ['pipe', 'pipe', 'pipe'] }) }, limits: { maxPortForwardPairs: 2 } }, async (s) => {
      const ws = await wsConnect(`${s.url({ verb: 'portforward', sandboxId: 'p1', ports: [] })}?port=80&port=81&port=82`, ['v4.channel.k8s.io']);
      const [code, reason] = await once(ws.ws, 'close') as [number, Buffer];
      assert.equal(code, 1008);
      assert.match(reason.toString(), /3 ports asked for: the limit is 2 \(config key streaming\.max_port_forward_pairs\)/);
    });
  });

  it('port-forward over WebSocket: a pod writing faster than the client reads is slowed, not queued in the daemon', async () => {
    let writer: Subprocess | undefined;
    // 512 MiB from the pod side; a client that stops reading.
    const connect = () => (writer = spawn('head', ['-c', String(512 * 1024 * 1024), '/dev/zero'], { stdio: ['pipe', 'pipe', 'pipe'] }));
    await withServer({ backend: { ...backend, portForward: async () => connect } }, async (s) => {
      const before = process.memoryUsage().arrayBuffers;
      const ws = await wsConnect(`${s.url({ verb: 'portforward', sandboxId: 'p1', ports: [] })}?port=80`, ['v4.channel.k8s.io']);
      (ws.ws as unknown as { _socket: { pause(): void } })._socket.pause();
      ws.ws.pause();
      await waitUntil(() => writer !== undefined);
      await sleep(1500);
      const grown = process.memoryUsage().arrayBuffers - before;
      assert.equal(writer!.exitCode, null, 'the pod side is held back');
      assert.ok(grown < 64 * 1024 * 1024, `buffers grew by ${grown} bytes`);
      ws.ws.terminate();
      await waitUntil(() => writer!.exitCode !== null || writer!.signalCode !== null);
    });
  });
});

async function waitUntil(cond: () => boolean, ms = 10_000): Promise<void> {
  for (const end = Date.now() + ms; !cond(); await sleep(10)) if (Date.now() > end) throw new Error('condition not met in time');
}

function onceData(s: Readable): Promise<Buffer> {
  return once(s, 'data').then(([b]) => b as Buffer);
}

/** Resolves once `count` has stopped growing for a while (the flow has stalled). */
async function stalled(count: () => number): Promise<void> {
  let last = -1;
  for (let quiet = 0; quiet < 5; await sleep(100)) {
    const now = count();
    quiet = now === last ? quiet + 1 : 0;
    last = now;
  }
}

/** A pattern stream of `total` bytes: chunk i is 64 KiB of byte i. */
function patternChunk(i: number): Buffer {
  return Buffer.alloc(64 * 1024, i & 0xff);
}

function expectedHash(total: number): string {
  const h = createHash('sha256');
  for (let i = 0; i * 64 * 1024 < total; i++) h.update(patternChunk(i));
  return h.digest('hex');
}

/** An exec backend whose process does not read stdin until `read()`; then hashes all of it. */
function readerGate(): { exec: StreamingBackend['exec']; read(): Promise<string> } {
  let stdin: Readable | undefined;
  let finish: (() => void) | undefined;
  return {
    exec: async (_req, io) => {
      stdin = io.stdin!;
      await new Promise<void>((resolve) => {
        finish = resolve;
        io.signal.addEventListener('abort', () => resolve(), { once: true });
      });
      return 0;
    },
    read: async () => {
      const h = createHash('sha256');
      for await (const chunk of stdin!) h.update(chunk as Buffer);
      finish!();
      return h.digest('hex');
    },
  };
}

interface Flood {
  send(total: number): Promise<void>;
  /** Bytes the transport has taken from us (handed to the socket). */
  accepted(): number;
  end(): void;
  close(): void;
}

async function spdyFlood(url: string): Promise<Flood> {
  const r = await spdyRemoteCommand(url, { stdin: true, stdout: true });
  let accepted = 0;
  return {
    send: async (total) => {
      for (let i = 0; i * 64 * 1024 < total; i++) {
        await new Promise<void>((resolve, reject) => r.stdin!.write(patternChunk(i), (err) => (err ? reject(err) : resolve())));
        accepted += 64 * 1024;
      }
    },
    accepted: () => accepted,
    end: () => r.stdin!.end(),
    close: () => r.conn.session.destroy(),
  };
}

async function wsFlood(url: string): Promise<Flood> {
  const s = await wsConnect(url, ['v5.channel.k8s.io']);
  let accepted = 0;
  return {
    send: async (total) => {
      for (let i = 0; i * 64 * 1024 < total; i++) {
        await new Promise<void>((resolve, reject) => s.ws.send(Buffer.concat([Buffer.from([0]), patternChunk(i)]), (err) => (err ? reject(err) : resolve())));
        accepted += 64 * 1024;
      }
    },
    accepted: () => accepted,
    end: () => s.ws.send(Buffer.from([255, 0])),
    close: () => s.ws.terminate(),
  };
}
