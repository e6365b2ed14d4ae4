// The streaming server against a stub backend: limits, idle timeouts, shutdown, URLs.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { silentLogger } from '../../../core/log.js';
import { StreamingServer, type StreamingBackend, type StreamRequest } from '../../../streaming/server.js';
import { readAll, spdyExec, spdyRemoteCommand, UpgradeRefused } from '../../support/streaming-client.js';

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

const exec = (cmd: string[]): StreamRequest => ({ verb: 'exec', containerId: 'c1', cmd, stdin: false, stdout: true, stderr: false, tty: false });

async function withServer(o: { maxSessions?: number; idleTimeoutMs?: number }, fn: (s: StreamingServer) => Promise<void>): Promise<void> {
  const s = await StreamingServer.start({ address: '127.0.0.1', port: 0, idleTimeoutMs: o.idleTimeoutMs ?? 60_000, limits: { maxSessions: o.maxSessions ?? 10 }, backend, log: silentLogger });
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
});
