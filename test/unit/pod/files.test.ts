import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hostsFile, podShmData, resolvConf } from '../../../oci/runtime/pod/files.js';

describe('pod files', () => {
  it('writes resolv.conf from the DNS config kubelet sends', () => {
    const text = resolvConf({ servers: ['10.96.0.10'], searches: ['ns.svc.cluster.local', 'svc.cluster.local'], options: ['ndots:5'] }, 'nameserver 1.1.1.1\n');
    assert.equal(text, 'search ns.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n');
  });

  it("falls back to the host's resolv.conf when no DNS config is given", () => {
    assert.equal(resolvConf(null, 'nameserver 192.0.2.1\n'), 'nameserver 192.0.2.1\n');
    assert.equal(resolvConf({ servers: [], searches: [], options: [] }, 'x\n'), 'x\n');
  });

  it("uses the host's hosts file only for host-network pods", () => {
    assert.equal(hostsFile(true, '10.0.0.1 node\n'), '10.0.0.1 node\n');
    assert.match(hostsFile(false, '10.0.0.1 node\n'), /^127\.0\.0\.1\tlocalhost\n/);
    assert.doesNotMatch(hostsFile(false, '10.0.0.1 node\n'), /10\.0\.0\.1/);
  });

  it('gives a user-namespaced pod\'s shm to its root on the host, so it needs no id-mapped mount', () => {
    assert.equal(podShmData(), 'mode=1777,size=67108864');
    assert.equal(podShmData({ uid: 196608, gid: 262144 }), 'mode=1777,size=67108864,uid=196608,gid=262144');
  });
});
