import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FailedPrecondition } from '../../../core/errors.js';
import { credentialHost, parseDockerConfig, requestAuthApplies } from '../../../oci/image/credentials.js';

test('credential hosts drop scheme and path; Docker Hub aliases are one host', () => {
  assert.equal(credentialHost('https://index.docker.io/v1/'), 'docker.io');
  assert.equal(credentialHost('registry-1.docker.io'), 'docker.io');
  assert.equal(credentialHost('http://127.0.0.1:5000/v2/'), '127.0.0.1:5000');
  assert.equal(credentialHost('Quay.IO'), 'quay.io');
});

test('request credentials apply to the registry they name, or to the image\'s when they name none', () => {
  assert.ok(requestAuthApplies({ username: 'a', serverAddress: 'https://index.docker.io/v1/' }, 'docker.io'));
  assert.ok(requestAuthApplies({ username: 'a' }, 'quay.io'));
  assert.ok(!requestAuthApplies({ username: 'a', serverAddress: 'quay.io' }, 'docker.io'));
  assert.ok(!requestAuthApplies({ username: 'a', serverAddress: 'registry.example.com:5000' }, 'registry.example.com'));
});

test('a Docker config.json gives credentials per host', () => {
  const m = parseDockerConfig(JSON.stringify({ auths: {
    'https://index.docker.io/v1/': { auth: Buffer.from('u:p').toString('base64') },
    'quay.io': { username: 'q', password: 'w' },
  }, credsStore: 'desktop' }), '/f');
  assert.equal(m.get('docker.io')?.auth, Buffer.from('u:p').toString('base64'));
  assert.equal(m.get('quay.io')?.username, 'q');
  assert.equal(parseDockerConfig('{}', '/f').size, 0);
  assert.throws(() => parseDockerConfig('{', '/f'), (e: Error) => e instanceof FailedPrecondition && e.message.includes('/f'));
  assert.throws(() => parseDockerConfig(JSON.stringify({ auths: { x: { auth: 'bm9jb2xvbg==' } } }), '/f'), /base64/);
});
