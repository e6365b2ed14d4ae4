// Finding programs: what counts as executable, and the order of candidates.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { findExecutable, isExecutableFile, resolveExecutable } from '../../../core/executables.js';

const dir = mkdtempSync(join(tmpdir(), 'minicri-exec-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function program(name: string, mode = 0o755): string {
  const file = join(dir, name);
  writeFileSync(file, '#!/bin/sh\n');
  chmodSync(file, mode);
  return file;
}

describe('isExecutableFile', () => {
  it('is true for a file with an execute bit, false for a plain file, a directory, a missing path and a path through a file', () => {
    assert.equal(isExecutableFile(program('run-me')), true);
    assert.equal(isExecutableFile(program('group-only', 0o610)), true);
    assert.equal(isExecutableFile(program('data', 0o644)), false);
    mkdirSync(join(dir, 'a-dir'));
    assert.equal(isExecutableFile(join(dir, 'a-dir')), false);
    assert.equal(isExecutableFile(join(dir, 'missing')), false);
    assert.equal(isExecutableFile(join(dir, 'run-me', 'below-a-file')), false);
  });
});

describe('findExecutable', () => {
  it('takes the first executable candidate in their order, so one installed earlier in the order wins at once', () => {
    mkdirSync(join(dir, 'one'));
    mkdirSync(join(dir, 'two'));
    const second = program('two/tool');
    const candidates = [join(dir, 'one/tool'), second];
    assert.equal(findExecutable(candidates), second);
    const first = program('one/tool');
    assert.equal(findExecutable(candidates), first);
    rmSync(first);
    rmSync(second);
    assert.equal(findExecutable(candidates), undefined);
  });
});

describe('resolveExecutable', () => {
  it('takes an absolute path as it is and looks a bare name up in PATH', () => {
    const abs = program('absolute-tool');
    assert.equal(resolveExecutable(abs), abs);
    assert.equal(resolveExecutable(join(dir, 'data')), undefined);
    mkdirSync(join(dir, 'bin'));
    const inPath = program('bin/only-here');
    const saved = process.env.PATH;
    process.env.PATH = `${join(dir, 'one')}:${join(dir, 'bin')}`;
    try {
      assert.equal(resolveExecutable('only-here'), inPath);
      assert.equal(resolveExecutable('not-anywhere'), undefined);
    } finally {
      process.env.PATH = saved;
    }
  });
});
