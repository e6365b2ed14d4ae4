import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Internal, ResourceExhausted } from '../../../core/errors.js';
import { pullSpaceError } from '../../../oci/image/images.js';

const systemError = (code: string, path?: string) => Object.assign(new Error(`${code}: failed`), { code, ...(path ? { path } : {}) });

test('a full disk or a used-up quota behind a pull is RESOURCE_EXHAUSTED naming where; anything else stays as it is', () => {
  const full = pullSpaceError(new Internal('layer 1', { cause: systemError('ENOSPC', '/var/lib/minicri/images/tmp/x') }), '/var/lib/minicri', 'busybox');
  assert.ok(full instanceof ResourceExhausted);
  assert.match(full.message, /^no space left on the device holding \/var\/lib\/minicri\/images\/tmp\/x while pulling "busybox": free space there/);
  const quota = pullSpaceError(systemError('EDQUOT'), '/var/lib/minicri', 'busybox');
  assert.ok(quota instanceof ResourceExhausted);
  assert.match(quota.message, /^the disk quota is used up on the device holding \/var\/lib\/minicri while pulling "busybox": raise the quota/);
  const other = systemError('EIO');
  assert.equal(pullSpaceError(other, '/var/lib/minicri', 'busybox'), other);
});
