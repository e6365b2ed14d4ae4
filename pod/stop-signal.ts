// Which signal StopContainer sends first: the container config's stop_signal (kubelet 1.33+), else the
// image's StopSignal, else SIGTERM; and the CRI Signal name that reports it. Pure.
import { InvalidArgument } from '../core/errors.js';
import { Signal } from '../gen/runtime/v1/Signal.js';
import type { Signal__Output } from '../gen/runtime/v1/Signal.js';
import { signalNumber } from '../oci/runtime/runc.js';

/** CRI names that are other names of the same Linux signal. */
const ALIASES: Record<string, string> = { SIGCLD: 'SIGCHLD', SIGPOLL: 'SIGIO', SIGIOT: 'SIGABRT' };

/** The Linux signal name of a CRI Signal value ("SIGRTMINPLUS3" is "SIGRTMIN+3"); undefined for RUNTIME_DEFAULT. */
export function criSignalName(value: Signal__Output | number | string): string | undefined {
  if (value === 'RUNTIME_DEFAULT' || value === 0 || value === '') return undefined;
  const name = typeof value === 'number' ? Object.keys(Signal)[value] : value;
  if (typeof name !== 'string' || !(name in Signal)) {
    throw new InvalidArgument(`stop_signal ${JSON.stringify(value)} is not a signal of the CRI: use a name such as SIGTERM or SIGUSR1`);
  }
  const rt = /^SIGRT(MIN|MAX)(?:(PLUS|MINUS)(\d+))?$/.exec(name);
  if (rt) return `SIGRT${rt[1]}${rt[2] ? `${rt[2] === 'PLUS' ? '+' : '-'}${rt[3]}` : ''}`;
  return ALIASES[name] ?? name;
}

/**
 * The signal in force for a container: the config's stop_signal wins over the image's StopSignal; SIGTERM when
 * neither names one. An image signal Linux lacks is refused here, at creation, rather than at the first stop.
 */
export function stopSignalInForce(configSignal: Signal__Output | number | undefined, imageStopSignal: string | undefined): string {
  const fromConfig = criSignalName(configSignal ?? 'RUNTIME_DEFAULT');
  if (fromConfig) return fromConfig;
  if (!imageStopSignal) return 'SIGTERM';
  try {
    signalNumber(imageStopSignal);
  } catch {
    throw new InvalidArgument(`the image's StopSignal "${imageStopSignal}" is not a Linux signal: set stop_signal in the container config or fix the image`);
  }
  return imageStopSignal;
}

/** The CRI Signal value reporting a signal given by name or number, as a record keeps it. */
export function criSignalOf(signal: string): Signal__Output {
  let number: number;
  try {
    number = signalNumber(signal);
  } catch {
    return 'RUNTIME_DEFAULT';
  }
  for (const name of Object.keys(Signal) as Signal__Output[]) {
    if (name === 'RUNTIME_DEFAULT' || name in ALIASES) continue;
    const linux = criSignalName(name);
    if (linux && numberOr0(linux) === number) return name;
  }
  return 'RUNTIME_DEFAULT';
}

function numberOr0(signal: string): number {
  try {
    return signalNumber(signal);
  } catch {
    return 0;
  }
}
