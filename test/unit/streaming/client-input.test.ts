// Back-pressure from a stream's reader to the client's connection (client-input.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CHUNK_OVERHEAD, ClientInput, InputBudget } from '../../../streaming/client-input.js';

function budget(limit: number) {
  const calls: string[] = [];
  return { calls, budget: new InputBudget(limit, () => calls.push('pause'), () => calls.push('resume'), () => calls.push('probe')) };
}

describe('client input', () => {
  it('pauses the connection once the bytes held pass the limit, and resumes when back under it', () => {
    const { calls, budget: b } = budget(1000);
    b.charge(600);
    b.charge(400);
    assert.deepEqual(calls, []);
    b.charge(1);
    b.charge(500);
    assert.deepEqual(calls, ['pause']);
    b.refund(500);
    assert.deepEqual(calls, ['pause']);
    b.refund(1);
    assert.deepEqual(calls, ['pause', 'resume']);
    assert.equal(b.bytes, 1000);
  });

  it('holds what a reader does not take against the budget, as one chunk in the stream and the rest queued', () => {
    const { calls, budget: b } = budget(64 * 1024);
    const input = new ClientInput(b);
    // A flood of tiny pieces: each is charged its object overhead too, so the budget is reached early.
    const n = 10_000;
    for (let i = 0; i < n; i++) input.add(Buffer.from([i & 0xff]));
    assert.equal(input.readableLength, 1, 'only the first piece went into the stream');
    assert.equal(b.bytes, (n - 1) * (1 + CHUNK_OVERHEAD));
    assert.deepEqual(calls, ['pause']);
    input.finish();
    const got: Buffer[] = [];
    input.on('data', (c: Buffer) => got.push(c));
    return new Promise<void>((resolve) => input.once('end', () => {
      const all = Buffer.concat(got);
      assert.equal(all.length, n);
      assert.ok(all.every((v, i) => v === (i & 0xff)), 'in order');
      assert.ok(got.length <= 3, `joined, not ${got.length} pieces`);
      assert.equal(b.bytes, 0);
      assert.deepEqual(calls, ['pause', 'resume']);
      resolve();
    }));
  });

  it('passes data straight through while the reader keeps up, and returns the charge of a destroyed stream', async () => {
    const { calls, budget: b } = budget(1024);
    const input = new ClientInput(b);
    const got: string[] = [];
    input.on('data', (c: Buffer) => got.push(c.toString()));
    await new Promise((r) => setImmediate(r));
    for (const s of ['a', 'b', 'c']) input.add(Buffer.from(s));
    await new Promise((r) => setImmediate(r));
    assert.equal(got.join(''), 'abc');
    assert.equal(b.bytes, 0);
    input.pause();
    await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 10; i++) input.add(Buffer.alloc(200));
    assert.ok(b.bytes > 1024);
    assert.deepEqual(calls, ['pause']);
    input.destroy();
    assert.equal(b.bytes, 0);
    assert.deepEqual(calls, ['pause', 'resume']);
    input.add(Buffer.from('late'));
    assert.equal(b.bytes, 0, 'nothing is held for a stream that is gone');
  });
});
