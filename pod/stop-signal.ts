// Which signal StopContainer sends first: the container config's stop_signal (kubelet 1.33+), else the
// image's StopSignal, else SIGTERM; and the CRI Signal value that reports it. Pure.
//
// The CRI Signal enum is read by number only: its numbers are the contract, its names are not (cri-api v0.37
// prefixes every name with SIGNAL_). The edge turns the name the wire decoder gives into its number with the
// loaded proto's own table (criSignalNumberOf), so a proto sync changes nothing here.
import { InvalidArgument } from '../core/errors.js';
import { signalNumber } from '../oci/runtime/runc.js';

/** The Linux signal of each CRI Signal number (the index); 0, RUNTIME_DEFAULT, names none. */
const LINUX_BY_CRI_NUMBER: readonly (string | undefined)[] = [
  undefined,
  'SIGABRT', 'SIGALRM', 'SIGBUS', 'SIGCHLD', 'SIGCHLD' /* SIGCLD */, 'SIGCONT', 'SIGFPE', 'SIGHUP', 'SIGILL', 'SIGINT',
  'SIGIO', 'SIGABRT' /* SIGIOT */, 'SIGKILL', 'SIGPIPE', 'SIGIO' /* SIGPOLL */, 'SIGPROF', 'SIGPWR', 'SIGQUIT', 'SIGSEGV',
  'SIGSTKFLT', 'SIGSTOP', 'SIGSYS', 'SIGTERM', 'SIGTRAP', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU', 'SIGURG', 'SIGUSR1', 'SIGUSR2',
  'SIGVTALRM', 'SIGWINCH', 'SIGXCPU', 'SIGXFSZ',
  // 35..65: SIGRTMIN, SIGRTMIN+1..+15, SIGRTMAX-14..-1, SIGRTMAX.
  'SIGRTMIN', ...Array.from({ length: 15 }, (_, i) => `SIGRTMIN+${i + 1}`),
  ...Array.from({ length: 14 }, (_, i) => `SIGRTMAX-${14 - i}`), 'SIGRTMAX',
];

/**
 * The CRI number of a Signal value as the wire decoder hands it: the number itself (proto3 enums are open, so an
 * unknown value arrives as its number), or a name looked up in `numbers`, the enum's table from the loaded proto.
 */
export function criSignalNumberOf(value: string | number | undefined, numbers: ReadonlyMap<string, number>): number {
  if (value === undefined || value === '') return 0;
  if (typeof value === 'number') return value;
  const n = numbers.get(value);
  if (n === undefined) {
    throw new InvalidArgument(`stop_signal "${value}" is not a signal of the CRI: use a name such as SIGTERM or SIGUSR1`);
  }
  return n;
}

/** The Linux signal name of a CRI Signal number ("SIGRTMIN+3" for 38); undefined for 0, RUNTIME_DEFAULT. */
export function criSignalName(value: number): string | undefined {
  if (value === 0) return undefined;
  const name = Number.isInteger(value) ? LINUX_BY_CRI_NUMBER[value] : undefined;
  if (name === undefined) {
    throw new InvalidArgument(`stop_signal ${value} is not a signal of the CRI: use a name such as SIGTERM or SIGUSR1`);
  }
  return name;
}

/**
 * The signal in force for a container: the config's stop_signal (its CRI number) wins over the image's
 * StopSignal; SIGTERM when neither names one. An image signal Linux lacks is refused here, at creation, rather
 * than at the first stop.
 */
export function stopSignalInForce(configSignal: number | undefined, imageStopSignal: string | undefined): string {
  const fromConfig = criSignalName(configSignal ?? 0);
  if (fromConfig) return fromConfig;
  if (!imageStopSignal) return 'SIGTERM';
  try {
    signalNumber(imageStopSignal);
  } catch {
    throw new InvalidArgument(
      `the image's StopSignal "${imageStopSignal}" is not a Linux signal: set stop_signal in the container config or fix the image`,
    );
  }
  return imageStopSignal;
}

/** Linux signal number → CRI number; the first one naming it: SIGCHLD (4) rather than its other name SIGCLD (5). */
const CRI_BY_LINUX_NUMBER = new Map<number, number>();
LINUX_BY_CRI_NUMBER.forEach((linux, cri) => {
  const n = linux && signalNumber(linux);
  if (n && !CRI_BY_LINUX_NUMBER.has(n)) CRI_BY_LINUX_NUMBER.set(n, cri);
});

/** The CRI Signal number reporting a signal given by name or number, as a record keeps it; 0 when none fits. */
export function criSignalOf(signal: string): number {
  try {
    return CRI_BY_LINUX_NUMBER.get(signalNumber(signal)) ?? 0;
  } catch {
    return 0;
  }
}
