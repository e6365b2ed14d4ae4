import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatReference, parseReference } from '../../../oci/image/reference.js';
import { InvalidArgument } from '../../../core/errors.js';

const D = `sha256:${'a'.repeat(64)}`;

test('normalizes like containerd and CRI-O', () => {
  const cases: Array<[string, string]> = [
    ['busybox', 'docker.io/library/busybox:latest'],
    ['busybox:1.36', 'docker.io/library/busybox:1.36'],
    ['library/busybox', 'docker.io/library/busybox:latest'],
    ['docker.io/busybox', 'docker.io/library/busybox:latest'],
    ['index.docker.io/library/busybox:1', 'docker.io/library/busybox:1'],
    ['user/app:v2', 'docker.io/user/app:v2'],
    ['registry.k8s.io/pause:3.10', 'registry.k8s.io/pause:3.10'],
    ['localhost/app', 'localhost/app:latest'],
    ['localhost:5000/a/b/c:t', 'localhost:5000/a/b/c:t'],
    ['127.0.0.1:5000/x', '127.0.0.1:5000/x:latest'],
    ['[::1]:5000/x:y', '[::1]:5000/x:y'],
    [`busybox@${D}`, `docker.io/library/busybox@${D}`],
    [`quay.io/a/b:tag@${D}`, `quay.io/a/b:tag@${D}`],
    ['a.b/c__d.e-f:T_1.x-y', 'a.b/c__d.e-f:T_1.x-y'],
  ];
  for (const [input, want] of cases) assert.equal(formatReference(parseReference(input)), want, input);
  assert.deepEqual(parseReference('quay.io:443/org/app:1'), { registry: 'quay.io:443', repository: 'org/app', tag: '1', digest: undefined });
  assert.deepEqual(parseReference(`app@${D}`), { registry: 'docker.io', repository: 'library/app', tag: undefined, digest: D });
});

test('malformed references are InvalidArgument naming them', () => {
  for (const bad of ['', 'Busybox', 'busybox:', 'busybox:-x', 'busybox@sha256:abc', `busybox@md5:${'a'.repeat(32)}`, 'a//b', 'a/b/', '/a', 'a:b:c',
    'bad_host!/x', `x:${'t'.repeat(129)}`, `r.io/${'a'.repeat(260)}`, 'a..b', 'ex..ample.com/x', 'Host.io/UPPER']) {
    assert.throws(() => parseReference(bad), (e: Error) => e instanceof InvalidArgument && e.message.includes(`"${bad}"`), bad);
  }
});
