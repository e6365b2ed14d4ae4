import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { ExitWatcher } from '../../../oci/runtime/exit-watch.js';

it('knows exit files present at start and those written later', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-exits-'));
  writeFileSync(join(dir, 'early'), '0');
  const watcher = new ExitWatcher(dir);
  assert.equal(watcher.mayHaveExited('anything'), true, 'before start every container may have exited');
  watcher.start();
  try {
    assert.equal(watcher.mayHaveExited('early'), true);
    assert.equal(watcher.mayHaveExited('late'), false);
    writeFileSync(join(dir, 'late'), '137');
    const deadline = Date.now() + 2000;
    while (!watcher.mayHaveExited('late')) {
      assert.ok(Date.now() < deadline, 'the new exit file was not seen within 2 s');
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    watcher.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

it('wakes a waiter when the exit file appears, and times out when it does not', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-exits-'));
  const watcher = new ExitWatcher(dir);
  watcher.start();
  try {
    const waiting = watcher.waitFor('c1', 5000);
    setTimeout(() => writeFileSync(join(dir, 'c1'), '0'), 20);
    // true: woken by the file (the timeout answers false).
    assert.equal(await waiting, true);
    assert.equal(await watcher.waitFor('never', 50), false);
  } finally {
    watcher.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

it('tells each listener of each exit file that appears after start, once', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-exits-'));
  writeFileSync(join(dir, 'before'), '0');
  const watcher = new ExitWatcher(dir);
  watcher.start();
  const told: string[] = [];
  watcher.onExit((id) => told.push(id));
  try {
    writeFileSync(join(dir, 'c1'), '0');
    writeFileSync(join(dir, 'c2'), '137');
    const deadline = Date.now() + 2000;
    while (told.length < 2) {
      assert.ok(Date.now() < deadline, `exit files not told within 2 s (told: ${told.join()})`);
      await new Promise((r) => setTimeout(r, 10));
    }
    // Rewriting a file the watcher knows (conmon does not, but inotify fires anyway) tells nothing new.
    writeFileSync(join(dir, 'c1'), '1');
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(told.sort(), ['c1', 'c2'], 'the file present at start is not an exit seen now');
  } finally {
    watcher.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

it('follows each file an event names: one renamed into place is seen, one removed is forgotten', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'minicri-exits-'));
  const watcher = new ExitWatcher(dir);
  watcher.start();
  const told: string[] = [];
  watcher.onExit((id) => told.push(id));
  const until = async (what: string, done: () => boolean) => {
    const deadline = Date.now() + 2000;
    while (!done()) {
      assert.ok(Date.now() < deadline, `${what} within 2 s`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  try {
    // As conmon writes it: a temporary file, then a rename onto the container's id.
    writeFileSync(join(dir, 'c1.tmp'), '0');
    renameSync(join(dir, 'c1.tmp'), join(dir, 'c1'));
    await until('the renamed exit file seen', () => watcher.mayHaveExited('c1'));
    await until('the temporary file forgotten', () => !watcher.mayHaveExited('c1.tmp'));
    assert.equal(told.filter((id) => id === 'c1').length, 1);
    rmSync(join(dir, 'c1'));
    await until('the removed exit file forgotten', () => !watcher.mayHaveExited('c1'));
    // Written again (a container id reused after a restore): seen and told again.
    writeFileSync(join(dir, 'c1'), '137');
    await until('the new exit file seen', () => told.filter((id) => id === 'c1').length === 2);
  } finally {
    watcher.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
