import assert from 'node:assert/strict';
import { test } from 'node:test';
import { basicCredentials, parseWwwAuthenticate } from '../../../oci/image/auth.js';
import { endpointsFor, registryMessage } from '../../../oci/image/registry.js';
import { InvalidArgument } from '../../../core/errors.js';

test('parses bearer and basic challenges', () => {
  assert.deepEqual(parseWwwAuthenticate('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull"'), [
    { scheme: 'bearer', params: { realm: 'https://auth.docker.io/token', service: 'registry.docker.io', scope: 'repository:library/busybox:pull' } },
  ]);
  assert.deepEqual(parseWwwAuthenticate('Basic realm="Registry Realm"'), [{ scheme: 'basic', params: { realm: 'Registry Realm' } }]);
  assert.deepEqual(parseWwwAuthenticate('bearer  Realm = "a\\"b" , error=invalid_token, Basic realm=x'), [
    { scheme: 'bearer', params: { realm: 'a"b', error: 'invalid_token' } },
    { scheme: 'basic', params: { realm: 'x' } },
  ]);
  assert.deepEqual(parseWwwAuthenticate('Bearer realm="h",scope="repository:a:pull repository:b:pull"')[0]?.params.scope, 'repository:a:pull repository:b:pull');
  assert.deepEqual(parseWwwAuthenticate(''), []);
});

test('credentials from a CRI AuthConfig', () => {
  assert.deepEqual(basicCredentials({ username: 'u', password: 'p' }), { username: 'u', password: 'p' });
  assert.deepEqual(basicCredentials({ auth: Buffer.from('u:p:q').toString('base64') }), { username: 'u', password: 'p:q' });
  assert.equal(basicCredentials({ identityToken: 'x' }), undefined);
  assert.equal(basicCredentials(undefined), undefined);
  assert.throws(() => basicCredentials({ auth: Buffer.from('nocolon').toString('base64') }), InvalidArgument);
});

test('endpoints: mirrors first, plain HTTP for loopback and insecure hosts, mirrors-only', () => {
  const hosts = {
    mirrors: { 'docker.io': { endpoints: ['mirror.local:5000', 'https://m2.example'] }, 'registry.k8s.io': { endpoints: ['127.0.0.1:5001'], mirrorsOnly: true } },
    insecure: ['mirror.local', 'plain.example:8080'],
  };
  assert.deepEqual(endpointsFor('docker.io', hosts), [
    { url: 'http://mirror.local:5000', mirror: true }, { url: 'https://m2.example', mirror: true }, { url: 'https://registry-1.docker.io', mirror: false },
  ]);
  assert.deepEqual(endpointsFor('registry.k8s.io', hosts), [{ url: 'http://127.0.0.1:5001', mirror: true }]);
  assert.deepEqual(endpointsFor('localhost:5000', hosts), [{ url: 'http://localhost:5000', mirror: false }]);
  assert.deepEqual(endpointsFor('127.3.4.5:80', hosts), [{ url: 'http://127.3.4.5:80', mirror: false }]);
  assert.deepEqual(endpointsFor('plain.example:8080', hosts), [{ url: 'http://plain.example:8080', mirror: false }]);
  assert.deepEqual(endpointsFor('plain.example', hosts), [{ url: 'https://plain.example', mirror: false }]);
});

test('registry error bodies become messages', () => {
  assert.equal(registryMessage(401, '{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":null}]}'), 'UNAUTHORIZED: authentication required');
  assert.equal(registryMessage(401, '{"details":"bad creds"}'), 'bad creds');
  assert.equal(registryMessage(500, ''), 'HTTP 500');
  assert.equal(registryMessage(502, '<html>bad gateway</html>'), '<html>bad gateway</html>');
});
