// The stop signal in force and its CRI name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgument } from '../../../core/errors.js';
import { criSignalName, criSignalOf, stopSignalInForce } from '../../../pod/stop-signal.js';

test('CRI Signal values name Linux signals', () => {
  assert.equal(criSignalName('RUNTIME_DEFAULT'), undefined);
  assert.equal(criSignalName(0), undefined);
  assert.equal(criSignalName('SIGUSR1'), 'SIGUSR1');
  assert.equal(criSignalName(29), 'SIGUSR1');
  assert.equal(criSignalName('SIGRTMINPLUS3'), 'SIGRTMIN+3');
  assert.equal(criSignalName('SIGRTMAXMINUS14'), 'SIGRTMAX-14');
  assert.equal(criSignalName('SIGRTMAX'), 'SIGRTMAX');
  assert.equal(criSignalName('SIGCLD'), 'SIGCHLD');
  assert.equal(criSignalName('SIGIOT'), 'SIGABRT');
  assert.throws(() => criSignalName(99), (err: Error) => err instanceof InvalidArgument && /stop_signal 99 is not a signal/.test(err.message));
  assert.throws(() => criSignalName('SIGNOPE'), InvalidArgument);
});

test('the config stop_signal wins over the image StopSignal, SIGTERM is the default', () => {
  assert.equal(stopSignalInForce('SIGUSR1', 'SIGQUIT'), 'SIGUSR1');
  assert.equal(stopSignalInForce('RUNTIME_DEFAULT', 'SIGQUIT'), 'SIGQUIT');
  assert.equal(stopSignalInForce(undefined, '3'), '3');
  assert.equal(stopSignalInForce('RUNTIME_DEFAULT', ''), 'SIGTERM');
  assert.equal(stopSignalInForce(undefined, undefined), 'SIGTERM');
  assert.throws(() => stopSignalInForce('RUNTIME_DEFAULT', 'SIGNOPE'), /StopSignal "SIGNOPE" is not a Linux signal/);
  assert.throws(() => stopSignalInForce(70, 'SIGQUIT'), InvalidArgument);
});

test('a signal in force reports as its CRI value', () => {
  assert.equal(criSignalOf('SIGTERM'), 'SIGTERM');
  assert.equal(criSignalOf('quit'), 'SIGQUIT');
  assert.equal(criSignalOf('10'), 'SIGUSR1');
  assert.equal(criSignalOf('SIGRTMIN+1'), 'SIGRTMINPLUS1');
  assert.equal(criSignalOf('SIGRTMAX-1'), 'SIGRTMAXMINUS1');
  assert.equal(criSignalOf('SIGCHLD'), 'SIGCHLD');
  assert.equal(criSignalOf('bogus'), 'RUNTIME_DEFAULT');
});
