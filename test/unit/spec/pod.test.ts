import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { ANNOTATION, containerAnnotations, sandboxAnnotations, withAnnotations } from '../../../oci/runtime/spec/annotations.js';
import { containerLogPath } from '../../../oci/runtime/spec/logpath.js';
import { applyOpts, baseSpec } from '../../../oci/runtime/spec/opts.js';
import { splitSysctls, validateHostname, withHostname, withSysctls } from '../../../oci/runtime/spec/pod.js';

describe('hostname', () => {
  it('accepts RFC 1123 names and refuses others', () => {
    assert.equal(validateHostname('web-0.example'), 'web-0.example');
    for (const bad of ['-web', 'web_0', 'a'.repeat(65), 'we b', '']) assert.throws(() => validateHostname(bad), InvalidArgument, bad);
  });
  it('withHostname sets or clears', () => {
    const s = applyOpts(baseSpec('/r'), [withHostname('h')]);
    assert.equal(s.hostname, 'h');
    withHostname(undefined)(s);
    assert.equal(s.hostname, undefined);
  });
});

describe('splitSysctls', () => {
  it('splits IPC and net sysctls, normalising slashes', () => {
    assert.deepEqual(splitSysctls({ 'kernel.shm_rmid_forced': '1', 'fs.mqueue.msg_max': '20', 'net/ipv4/ip_forward': '1', 'net.core.somaxconn': '1024' }, false, false), {
      ipc: { 'kernel.shm_rmid_forced': '1', 'fs.mqueue.msg_max': '20' },
      net: { 'net.ipv4.ip_forward': '1', 'net.core.somaxconn': '1024' },
    });
  });
  it('refuses non-namespaced sysctls and those of a host namespace', () => {
    assert.throws(() => splitSysctls({ 'vm.swappiness': '1' }, false, false), /not namespaced/);
    assert.throws(() => splitSysctls({ 'kernel.hostname': 'x' }, false, false), /not namespaced/);
    assert.throws(() => splitSysctls({ 'kernel.msgmax': '1' }, true, false), /host IPC/);
    assert.throws(() => splitSysctls({ 'net.core.somaxconn': '1' }, false, true), /host networking/);
    assert.throws(() => splitSysctls({ 'bad name': '1' }, false, false), InvalidArgument);
    assert.throws(() => splitSysctls({ 'kernel.sem': '1\n2' }, false, false), InvalidArgument);
  });
  it('withSysctls sets linux.sysctl only when there are any', () => {
    assert.deepEqual(applyOpts(baseSpec('/r'), [withSysctls({ 'kernel.sem': '1 2 3 4' })]).linux?.sysctl, { 'kernel.sem': '1 2 3 4' });
    assert.equal(applyOpts(baseSpec('/r'), [withSysctls({})]).linux?.sysctl, undefined);
  });
});

describe('annotations', () => {
  const pod = { sandboxId: 'sb', name: 'web', namespace: 'ns', uid: 'u' };
  it('sandbox and container annotations', () => {
    assert.deepEqual(sandboxAnnotations(pod, '/var/log/pods/x', 'pause:3.10'), {
      'io.kubernetes.cri.container-type': 'sandbox',
      'io.kubernetes.cri.sandbox-id': 'sb',
      'io.kubernetes.cri.sandbox-name': 'web',
      'io.kubernetes.cri.sandbox-namespace': 'ns',
      'io.kubernetes.cri.sandbox-uid': 'u',
      'io.kubernetes.cri.sandbox-log-directory': '/var/log/pods/x',
      'io.kubernetes.cri.image-name': 'pause:3.10',
    });
    const c = containerAnnotations(pod, 'app', 'busybox');
    assert.equal(c[ANNOTATION.containerType], 'container');
    assert.equal(c[ANNOTATION.containerName], 'app');
    assert.equal(c[ANNOTATION.sandboxId], 'sb');
  });
  it('config annotations cannot override ours', () => {
    const s = applyOpts(baseSpec('/r'), [withAnnotations({ a: 'b', [ANNOTATION.sandboxId]: 'evil' }, { [ANNOTATION.sandboxId]: 'sb' })]);
    assert.deepEqual(s.annotations, { a: 'b', [ANNOTATION.sandboxId]: 'sb' });
  });
});

describe('containerLogPath', () => {
  it('joins inside the pod log directory', () => {
    assert.equal(containerLogPath('/var/log/pods/p', 'app/0.log'), '/var/log/pods/p/app/0.log');
    assert.equal(containerLogPath('/var/log/pods/p/', './app/../app/1.log'), '/var/log/pods/p/app/1.log');
  });
  it('no log when either is empty', () => {
    assert.equal(containerLogPath('', 'a.log'), undefined);
    assert.equal(containerLogPath('/var/log/pods/p', ''), undefined);
  });
  it('refuses escapes', () => {
    assert.throws(() => containerLogPath('/var/log/pods/p', '../q/0.log'), InvalidArgument);
    assert.throws(() => containerLogPath('/var/log/pods/p', '../p2/0.log'), InvalidArgument);
    assert.throws(() => containerLogPath('/var/log/pods/p', 'a/../../x'), InvalidArgument);
    assert.throws(() => containerLogPath('/var/log/pods/p', '/etc/passwd'), InvalidArgument);
    assert.throws(() => containerLogPath('/var/log/pods/p', '.'), InvalidArgument);
    assert.throws(() => containerLogPath('relative', 'a.log'), InvalidArgument);
  });
});
