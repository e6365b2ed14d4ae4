import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import {
  DEFAULT_CAPABILITIES, normalizeCapability, resolveCapabilities, withCapabilities,
} from '../../../oci/runtime/spec/capabilities.js';
import { applyOpts, baseSpec } from '../../../oci/runtime/spec/opts.js';

const ALL = ['CAP_CHOWN', 'CAP_KILL', 'CAP_NET_ADMIN', 'CAP_SYS_ADMIN'];
const D = DEFAULT_CAPABILITIES;

describe('capabilities', () => {
  it('has containerd\'s 14 default capabilities', () => {
    assert.equal(D.length, 14);
    assert.ok(D.includes('CAP_AUDIT_WRITE') && D.includes('CAP_NET_RAW') && !D.includes('CAP_SYS_ADMIN'));
  });
  it('normalizes CRI names', () => {
    assert.equal(normalizeCapability('net_admin'), 'CAP_NET_ADMIN');
    assert.equal(normalizeCapability('CAP_KILL'), 'CAP_KILL');
    assert.throws(() => normalizeCapability('FLY'), InvalidArgument);
  });
  it('adds and drops named capabilities', () => {
    const caps = resolveCapabilities(D, ['NET_ADMIN', 'CHOWN'], ['NET_RAW'], ALL);
    assert.ok(caps.includes('CAP_NET_ADMIN'));
    assert.ok(!caps.includes('CAP_NET_RAW'));
    assert.equal(caps.filter((c) => c === 'CAP_CHOWN').length, 1);
  });
  it('add ALL gives the bounding set', () => {
    assert.deepEqual(resolveCapabilities(D, ['ALL'], [], ALL), ALL);
  });
  it('drop ALL gives none', () => {
    assert.deepEqual(resolveCapabilities(D, [], ['ALL'], ALL), []);
  });
  it('drop ALL then add X gives just X', () => {
    assert.deepEqual(resolveCapabilities(D, ['NET_BIND_SERVICE'], ['ALL'], ALL), ['CAP_NET_BIND_SERVICE']);
  });
  it('add ALL then drop X gives all but X', () => {
    assert.deepEqual(resolveCapabilities(D, ['all'], ['CHOWN'], ALL), ['CAP_KILL', 'CAP_NET_ADMIN', 'CAP_SYS_ADMIN']);
  });
  it('add ALL and drop ALL gives none', () => {
    assert.deepEqual(resolveCapabilities(D, ['ALL'], ['ALL'], ALL), []);
  });
  it('withCapabilities fills bounding/effective/permitted and leaves inheritable/ambient empty', () => {
    const caps = applyOpts(baseSpec('/r'), [withCapabilities(['CAP_KILL'])]).process?.capabilities;
    assert.deepEqual(caps, { bounding: ['CAP_KILL'], effective: ['CAP_KILL'], permitted: ['CAP_KILL'], inheritable: [], ambient: [] });
  });
});
