// certs.d as containerd and CRI-O read it: a directory belongs to one host:port, and it is read when a pull
// begins, once per host, so an edited file counts from the next pull on.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FailedPrecondition } from '../../../core/errors.js';
import { silentLogger } from '../../../core/log.js';
import { parseReference } from '../../../oci/image/reference.js';
import { RegistryClient } from '../../../oci/image/registry.js';
import { certsDirCandidates, readHostTls, TlsDispatchers } from '../../../oci/image/tls.js';

async function certsDir(t: { after(fn: () => Promise<void>): void }, hosts: Record<string, Record<string, string>>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-certs-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const [host, files] of Object.entries(hosts)) {
    await mkdir(join(dir, host));
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, host, name), text);
  }
  return dir;
}

const CLIENT = { 'client.cert': 'CERT', 'client.key': 'KEY', 'ca.crt': 'CA' };

test('certs.d directories: host:port exactly (also as host_port_), Docker Hub\'s API hosts as docker.io, then _default', () => {
  assert.deepEqual(certsDirCandidates('127.0.0.1:5000'), ['127.0.0.1_5000_', '127.0.0.1:5000', '_default']);
  assert.deepEqual(certsDirCandidates('example.com'), ['example.com', '_default']);
  assert.deepEqual(certsDirCandidates('registry-1.docker.io'), ['registry-1.docker.io', 'docker.io', '_default']);
  assert.deepEqual(certsDirCandidates('[::1]:5000'), ['[::1]_5000_', '[::1]:5000', '_default']);
});

test('a directory for a host is not one for the same host on another port', async (t) => {
  const dir = await certsDir(t, { 'example.com': CLIENT, 'example.com_5001_': { 'ca.crt': 'CA5001' } });
  assert.equal(await readHostTls(dir, 'example.com:5000'), undefined, 'example.com/ hands nothing to example.com:5000');
  assert.deepEqual(await readHostTls(dir, 'example.com'), { dir: join(dir, 'example.com'), ca: ['CA'], cert: 'CERT', key: 'KEY' });
  assert.deepEqual(await readHostTls(dir, 'example.com:5001'), { dir: join(dir, 'example.com_5001_'), ca: ['CA5001'] });
});

test('_default serves a host without a directory of its own', async (t) => {
  const dir = await certsDir(t, { _default: { 'ca.crt': 'ANY' }, 'own.example': { 'ca.crt': 'OWN' } });
  assert.deepEqual((await readHostTls(dir, 'other.example:443'))?.ca, ['ANY']);
  assert.deepEqual((await readHostTls(dir, 'own.example'))?.ca, ['OWN']);
});

test('a client certificate without its key is FailedPrecondition naming both', async (t) => {
  const dir = await certsDir(t, { 'example.com': { 'client.cert': 'CERT' } });
  await assert.rejects(readHostTls(dir, 'example.com'), (e: Error) =>
    e instanceof FailedPrecondition && e.message.includes(join(dir, 'example.com', 'client.cert')) && e.message.includes('no key client.key beside it'));
});

test('a certs.d file that cannot be read is FailedPrecondition naming it', async (t) => {
  const dir = await certsDir(t, { 'example.com': {} });
  await symlink('/nonexistent/ca.crt', join(dir, 'example.com', 'ca.crt'));
  await assert.rejects(readHostTls(dir, 'example.com'), (e: Error) =>
    e instanceof FailedPrecondition && e.message.includes(join(dir, 'example.com', 'ca.crt')));
});

test('dispatchers read a host\'s directory once until the next refresh (a pull beginning)', async (t) => {
  const dir = await certsDir(t, { 'example.com': { 'ca.crt': 'CA1' } });
  const tls = new TlsDispatchers(dir);
  const url = new URL('https://example.com/v2/');
  const first = await tls.for(url, false);
  assert.ok(first, 'a CA in certs.d gives the host its own dispatcher');
  await writeFile(join(dir, 'example.com', 'ca.crt'), 'CA2');
  assert.equal(await tls.for(url, false), first, 'the edit is not read again within the pull');
  tls.refresh();
  const second = await tls.for(url, false);
  assert.ok(second && second !== first, 'the next pull reads the edited file');
  assert.equal(await tls.for(new URL('http://example.com/v2/'), false), undefined, 'plain HTTP has no TLS');
  assert.equal(await tls.for(new URL('https://example.com:5000/v2/'), false), undefined, 'another port has no directory');
});

test('a pull from a host whose certs.d lacks a key fails FailedPrecondition, without a request or retries', async (t) => {
  const dir = await certsDir(t, { 'registry.example.com': { 'client.cert': 'CERT' } });
  let requests = 0;
  const client = new RegistryClient({
    hosts: { mirrors: {}, insecure: [], certsDir: dir }, log: silentLogger,
    transport: () => { requests++; return Promise.reject(new Error('not reached')); },
  });
  await assert.rejects(client.getManifest(parseReference('registry.example.com/app:v1'), 'v1'), (e: Error) =>
    e instanceof FailedPrecondition && e.message.includes('no key client.key beside it'));
  assert.equal(requests, 0);
});
