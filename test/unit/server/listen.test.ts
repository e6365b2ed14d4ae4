import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { lstat, mkdtemp, readdir, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { lstatSync } from 'node:fs';
import { listenUnixSocket, socketAnswers } from '../../../server/listen.js';

describe('listenUnixSocket', () => {
  let dir: string;
  let umask: number;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'listen-'));
    // The loosest umask: a socket bound in place would be 0777 until its chmod.
    umask = process.umask(0);
  });
  after(async () => {
    process.umask(umask);
    await rm(dir, { recursive: true, force: true });
  });

  it('puts the socket in place with mode 0660, leaves no staging directory, serves, and removes it on close', async () => {
    const path = join(dir, 'minicri.sock');
    const server = net.createServer((socket) => socket.end('hello'));
    const listener = await listenUnixSocket(server, path);
    const st = await lstat(path);
    assert.ok(st.isSocket());
    assert.equal(st.mode & 0o777, 0o660);
    assert.deepEqual(await readdir(dir), ['minicri.sock']);
    const answer = await new Promise<string>((resolve, reject) => {
      let text = '';
      net.connect(path).setEncoding('utf8').on('data', (d: string) => { text += d; }).on('end', () => resolve(text)).on('error', reject);
    });
    assert.equal(answer, 'hello');
    await listener.close();
    assert.equal(await socketAnswers(path), false);
    assert.deepEqual(await readdir(dir), []);
  });

  it('binds in a directory only its owner can enter before the socket has its final mode', async () => {
    const path = join(dir, 'watched.sock');
    const server = net.createServer();
    // Where and with which parent mode the bind happened, looked at synchronously in 'listening' (before the chmod).
    let seen: { bound: string; parentMode: number } | undefined;
    server.once('listening', () => {
      const bound = server.address() as string;
      seen = { bound, parentMode: lstatSync(dirname(bound)).mode & 0o777 };
    });
    const listener = await listenUnixSocket(server, path);
    assert.ok(seen);
    assert.notEqual(seen.bound, path);
    assert.equal(dirname(seen.bound), join(dir, basename(dirname(seen.bound))));
    assert.equal(seen.parentMode, 0o700);
    await listener.close();
  });
});
