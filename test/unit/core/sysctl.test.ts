import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { normalizeSysctlName, normalizeSysctls, sysctlNamespace } from '../../../core/sysctl.js';

describe('sysctl names', () => {
  it('swaps the separators of a name written with slashes, so a dot inside a component survives', () => {
    assert.equal(normalizeSysctlName('net/ipv4/ip_forward'), 'net.ipv4.ip_forward');
    assert.equal(normalizeSysctlName('net/ipv4/conf/eth0.100/rp_filter'), 'net.ipv4.conf.eth0/100.rp_filter');
    assert.equal(normalizeSysctlName('net.ipv4.conf.eth0/100.rp_filter'), 'net.ipv4.conf.eth0/100.rp_filter');
    assert.equal(normalizeSysctlName('kernel'), 'kernel');
  });

  it('tells the namespace of a sysctl, none for node-wide ones', () => {
    assert.equal(sysctlNamespace('kernel.shm_rmid_forced'), 'ipc');
    assert.equal(sysctlNamespace('fs.mqueue.msg_max'), 'ipc');
    assert.equal(sysctlNamespace('net.core.somaxconn'), 'net');
    assert.equal(sysctlNamespace('kernel.panic'), undefined);
    assert.equal(sysctlNamespace('vm.swappiness'), undefined);
  });

  it('normalises a pod\'s sysctls and refuses node-wide ones, bad names and bad values', () => {
    assert.deepEqual(normalizeSysctls({ 'net/ipv4/ip_unprivileged_port_start': '0', 'kernel.shm_rmid_forced': '1', 'net/ipv4/ping_group_range': '0 2147483647' }), {
      'net.ipv4.ip_unprivileged_port_start': '0', 'kernel.shm_rmid_forced': '1', 'net.ipv4.ping_group_range': '0 2147483647',
    });
    assert.throws(() => normalizeSysctls({ 'kernel.panic': '1' }), /not namespaced/);
    assert.throws(() => normalizeSysctls({ 'vm.swappiness': '1' }), /not namespaced/);
    assert.throws(() => normalizeSysctls({ 'net.ipv4/../../kernel/x': '1' }), InvalidArgument);
    assert.throws(() => normalizeSysctls({ 'bad name': '1' }), /not a valid sysctl name/);
    assert.throws(() => normalizeSysctls({ 'net.ipv4.ip_forward': '1\nkernel.x=1' }), /invalid value/);
  });
});
