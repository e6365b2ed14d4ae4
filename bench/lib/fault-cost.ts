// What a page fault costs on the machine a bench ran on, recorded with its results: a first write to a fresh page,
// and a first write after a fork. A fork (Node's child_process) makes every writable page of the process
// copy-on-write: the next write to each takes a fault, whatever the page was for. On the VMs of 2026-11-28
// either fault cost 11–20 µs, and while minicri started its processes that way a pull after a hundred pods
// wrote ~12 thousand pages of the daemon afresh, 0.2 s of CPU; it now starts them with posix_spawn
// (core/spawn.ts), as containerd's Go runtime starts its own without copying its pages.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseProcStat } from '../../oci/runtime/runc-state.js';
import { round } from './stats.js';

const BYTES = 64 << 20;

export interface FaultCost {
  /** The pages the 64 MiB written took faults on, the first time and after a fork. */
  pages: { fresh: number; afterFork: number };
  /** Microseconds per fault: the write's time beyond writing the same pages again, over its faults. */
  usPerFault: { fresh: number; afterFork: number };
}

const minorFaults = () => parseProcStat(readFileSync('/proc/self/stat', 'utf8')).minorFaults;

function write(buf: Buffer, value: number): { faults: number; ms: number } {
  const f0 = minorFaults();
  const t0 = performance.now();
  buf.fill(value);
  return { faults: minorFaults() - f0, ms: performance.now() - t0 };
}

/** Writes 64 MiB of memory not yet touched, again, and again after spawning `true`. */
export function faultCost(): FaultCost {
  // Its own mapping, above malloc's mmap threshold: no page of it is touched before the first write.
  const buf = Buffer.allocUnsafeSlow(BYTES);
  const fresh = write(buf, 1);
  const floor = write(buf, 2);
  const child = spawnSync('true');
  if (child.status !== 0) throw new Error(`spawning true: ${child.error?.message ?? `status ${child.status}`}`);
  const afterFork = write(buf, 3);
  const per = (w: { faults: number; ms: number }) => (w.faults === 0 ? 0 : round(((w.ms - floor.ms) * 1000) / w.faults, 1));
  return { pages: { fresh: fresh.faults, afterFork: afterFork.faults }, usPerFault: { fresh: per(fresh), afterFork: per(afterFork) } };
}
