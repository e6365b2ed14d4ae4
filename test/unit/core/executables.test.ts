// Finding programs: what counts as executable, the order of candidates, and the remembered hit never
// outliving the file it names.
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
  it('takes the first executable candidate, and searches again once the remembered one is gone', () => {
    mkdirSync(join(dir, 'one'));
    mkdirSync(join(dir, 'two'));
    const second = program('two/tool');
    const candidates = [join(dir, 'one/tool'), second];
    assert.equal(findExecutable('tool', candidates), second);
    const first = program('one/tool');
    // The remembered hit is still valid and listed, so it stays the answer until it goes.
    assert.equal(findExecutable('tool', candidates), second);
    rmSync(second);
    assert.equal(findExecutable('tool', candidates), first);
    rmSync(first);
    assert.equal(findExecutable('tool', candidates), undefined);
  });

  it('does not answer with a remembered path that is not among this call\'s candidates', () => {
    const elsewhere = program('elsewhere-tool');
    assert.equal(findExecutable('moved', [elsewhere]), elsewhere);
    assert.equal(findExecutable('moved', [join(dir, 'one/moved')]), undefined);
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
