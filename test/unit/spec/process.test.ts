import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgument } from '../../../core/errors.js';
import { applyOpts, baseSpec } from '../../../oci/runtime/spec/opts.js';
import {
  checkExecSize, DEFAULT_PATH, processArgs, processCwd, processEnv, withRlimits, withTerminal,
} from '../../../oci/runtime/spec/process.js';

describe('processArgs', () => {
  const image = { Entrypoint: ['/entry'], Cmd: ['--serve'] };
  it('uses image Entrypoint + Cmd when the config sets neither', () => {
    assert.deepEqual(processArgs([], [], image), ['/entry', '--serve']);
  });
  it('args replace Cmd but keep Entrypoint', () => {
    assert.deepEqual(processArgs([], ['--debug'], image), ['/entry', '--debug']);
  });
  it('command replaces Entrypoint and drops the image Cmd', () => {
    assert.deepEqual(processArgs(['/bin/sh'], [], image), ['/bin/sh']);
    assert.deepEqual(processArgs(['/bin/sh'], ['-c', 'true'], image), ['/bin/sh', '-c', 'true']);
  });
  it('treats Entrypoint [""] as no entrypoint', () => {
    assert.deepEqual(processArgs([], [], { Entrypoint: [''], Cmd: ['sh'] }), ['sh']);
  });
  it('refuses an empty argv', () => {
    assert.throws(() => processArgs([], [], {}), InvalidArgument);
    assert.throws(() => processArgs([], [], { Entrypoint: null, Cmd: null }), /no command/);
  });
});

describe('processEnv', () => {
  it('defaults PATH and sets HOSTNAME', () => {
    assert.deepEqual(processEnv('web-0', [], []), [`PATH=${DEFAULT_PATH}`, 'HOSTNAME=web-0']);
  });
  it('lets the image replace PATH and the config override the image, in place', () => {
    const env = processEnv('h', ['PATH=/bin', 'LANG=C', 'A=1'], [{ key: 'LANG', value: 'en_US.UTF-8' }, { key: 'B', value: 'x=y' }]);
    assert.deepEqual(env, ['PATH=/bin', 'HOSTNAME=h', 'LANG=en_US.UTF-8', 'A=1', 'B=x=y']);
  });
  it('refuses bad keys', () => {
    assert.throws(() => processEnv('', [], [{ key: '', value: 'x' }]), InvalidArgument);
    assert.throws(() => processEnv('', [], [{ key: 'A=B', value: 'x' }]), InvalidArgument);
  });
});

describe('processCwd', () => {
  it('prefers config, then image, then /', () => {
    assert.equal(processCwd('/work', { WorkingDir: '/app' }), '/work');
    assert.equal(processCwd('', { WorkingDir: '/app/' }), '/app');
    assert.equal(processCwd('', {}), '/');
  });
  it('refuses relative paths', () => {
    assert.throws(() => processCwd('app', {}), InvalidArgument);
  });
});

describe('withTerminal / withRlimits', () => {
  it('sets terminal', () => {
    assert.equal(applyOpts(baseSpec('/r'), [withTerminal(true)]).process?.terminal, true);
  });
  it('sets no rlimits by default and validates given ones', () => {
    assert.equal(applyOpts(baseSpec('/r'), [withRlimits([])]).process?.rlimits, undefined);
    const r = [{ type: 'RLIMIT_NOFILE', soft: 1024, hard: 4096 }];
    assert.deepEqual(applyOpts(baseSpec('/r'), [withRlimits(r)]).process?.rlimits, r);
    assert.throws(() => withRlimits([{ type: 'RLIMIT_NOFILE', soft: 5, hard: 1 }])(baseSpec('/r')), InvalidArgument);
    assert.throws(() => withRlimits([{ type: 'nofile', soft: 1, hard: 1 }])(baseSpec('/r')), InvalidArgument);
  });
});

describe('checkExecSize', () => {
  it('lets through what the kernel execs, and refuses an argument, a variable or a total over its limits', () => {
    checkExecSize(['/bin/app', 'x'.repeat(100_000)], ['PATH=/bin', `BIG=${'y'.repeat(100_000)}`]);
    assert.throws(() => checkExecSize(['/bin/app', 'x'.repeat(4 * 1024 * 1024)], []), /argument 1 is 4194305 bytes long; .* over 131072 bytes/);
    assert.throws(() => checkExecSize(['/bin/app'], [`SECRET=${'y'.repeat(200_000)}`]), /environment variable "SECRET" is/);
    assert.throws(() => checkExecSize(['/bin/app', ...Array.from({ length: 20 }, () => 'z'.repeat(120_000))], []), /exceed 2097152 bytes/);
  });
});

it('environment values arrive as bytes: UTF-8 unchanged, other bytes as U+FFFD, NUL refused', async () => {
  const { envText, processEnv } = await import('../../../oci/runtime/spec/process.js');
  assert.equal(envText(Buffer.from('héllo wörld')), 'héllo wörld');
  assert.equal(envText(new Uint8Array([0x61, 0xff, 0x62])), 'a\uFFFDb');
  assert.equal(envText('plain'), 'plain');
  assert.deepEqual(processEnv('', [], [{ key: 'A', value: Buffer.from('é') }]).at(-1), 'A=é');
  assert.throws(() => processEnv('', [], [{ key: 'A', value: Buffer.from([0x61, 0, 0x62]) }]), /not valid/);
});
