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

test('the tests run on the pinned Node.js (setup.sh puts it first in PATH)', async () => {
  assert.equal(process.versions.node, (await pin()).node);
});
