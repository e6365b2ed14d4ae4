// The stop signal in force and its CRI value, read and reported by the enum's numbers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgument } from '../../../core/errors.js';
import { criSignalName, criSignalNumberOf, criSignalOf, stopSignalInForce } from '../../../pod/stop-signal.js';
import { criEnumNumbers } from '../../../server/proto.js';

/** The Signal table of this proto, and the same with cri-api v0.37's names (SIGNAL_ prefixed, same numbers). */
const current = criEnumNumbers('Signal');
const renamed = new Map([...current].map(([name, n]) => [`SIGNAL_${name}`, n]));

test('CRI Signal numbers name Linux signals', () => {
  assert.equal(criSignalName(0), undefined);
  assert.equal(criSignalName(29), 'SIGUSR1');
  assert.equal(criSignalName(23), 'SIGTERM');
  assert.equal(criSignalName(38), 'SIGRTMIN+3');
  assert.equal(criSignalName(51), 'SIGRTMAX-14');
  assert.equal(criSignalName(64), 'SIGRTMAX-1');
  assert.equal(criSignalName(65), 'SIGRTMAX');
  assert.equal(criSignalName(5), 'SIGCHLD', 'SIGCLD is another name of SIGCHLD');
  assert.equal(criSignalName(12), 'SIGABRT', 'SIGIOT is another name of SIGABRT');
  assert.equal(criSignalName(15), 'SIGIO', 'SIGPOLL is another name of SIGIO');
  assert.throws(() => criSignalName(99), (err: Error) => err instanceof InvalidArgument && /stop_signal 99 is not a signal/.test(err.message));
  assert.throws(() => criSignalName(-1), InvalidArgument);
});

test('a wire Signal decodes by its number, under the names of this proto and of cri-api v0.37 alike', () => {
  assert.equal(current.get('SIGUSR1'), 29, 'the proto table is read');
  for (const [name, n] of current) {
    assert.equal(criSignalNumberOf(name, current), n);
    assert.equal(criSignalNumberOf(`SIGNAL_${name}`, renamed), n);
    assert.equal(criSignalName(criSignalNumberOf(`SIGNAL_${name}`, renamed)), criSignalName(criSignalNumberOf(name, current)), name);
  }
  assert.equal(criSignalName(criSignalNumberOf('SIGNAL_SIGRTMINPLUS3', renamed)), 'SIGRTMIN+3');
  assert.equal(criSignalName(criSignalNumberOf('SIGNAL_RUNTIME_DEFAULT', renamed)), undefined);
  // An unknown value arrives as its number (proto3 enums are open); nothing at all is the default.
  assert.equal(criSignalNumberOf(99, current), 99);
  assert.equal(criSignalNumberOf(undefined, current), 0);
  assert.throws(() => criSignalNumberOf('SIGNOPE', current), (err: Error) => err instanceof InvalidArgument && /"SIGNOPE"/.test(err.message));
});

test('every CRI Signal number names a Linux signal that reports back as the same or an equal number', () => {
  for (const n of current.values()) {
    if (n === 0) continue;
    const linux = criSignalName(n)!;
    assert.equal(criSignalName(criSignalOf(linux)), linux, `${n} (${linux})`);
  }
});

test('the config stop_signal wins over the image StopSignal, SIGTERM is the default', () => {
  assert.equal(stopSignalInForce(29, 'SIGQUIT'), 'SIGUSR1');
  assert.equal(stopSignalInForce(0, 'SIGQUIT'), 'SIGQUIT');
  assert.equal(stopSignalInForce(undefined, '3'), '3');
  assert.equal(stopSignalInForce(0, ''), 'SIGTERM');
  assert.equal(stopSignalInForce(undefined, undefined), 'SIGTERM');
  assert.throws(() => stopSignalInForce(0, 'SIGNOPE'), /StopSignal "SIGNOPE" is not a Linux signal/);
  assert.throws(() => stopSignalInForce(70, 'SIGQUIT'), InvalidArgument);
});

test('a signal in force reports as its CRI number', () => {
  assert.equal(criSignalOf('SIGTERM'), 23);
  assert.equal(criSignalOf('quit'), 18);
  assert.equal(criSignalOf('10'), 29, 'Linux 10 is SIGUSR1');
  assert.equal(criSignalOf('SIGRTMIN+1'), 36);
  assert.equal(criSignalOf('SIGRTMAX-1'), 64);
  assert.equal(criSignalOf('SIGCHLD'), 4, 'SIGCHLD, not its other name SIGCLD (5)');
  assert.equal(criSignalOf('bogus'), 0);
});
