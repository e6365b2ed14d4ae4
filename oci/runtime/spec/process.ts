// The container process: argv by Kubernetes rules, environment, working directory, terminal
// and rlimits. Identity and capabilities live in user.ts and capabilities.ts.
import path from 'node:path';
import { InvalidArgument } from '../../../core/errors.js';
import type { SpecOpt } from './opts.js';
import { processOf } from './opts.js';
import type { POSIXRlimit } from './types.js';

export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The parts of an OCI image config (config section) that shape a container. */
export interface ImageConfig {
  Entrypoint?: string[] | null;
  Cmd?: string[] | null;
  Env?: string[] | null;
  WorkingDir?: string;
  User?: string;
  Volumes?: Record<string, object> | null;
  StopSignal?: string;
}

/**
 * argv as Kubernetes defines it: a command replaces the image Entrypoint (and then the image Cmd
 * is ignored), args replace the image Cmd. An Entrypoint of [""] is Docker's way to say "none".
 */
export function processArgs(command: readonly string[], args: readonly string[], image: ImageConfig): string[] {
  let entry: readonly string[] = command;
  let rest: readonly string[] = args;
  if (command.length === 0) {
    const ep = image.Entrypoint ?? [];
    entry = ep.length === 1 && ep[0] === '' ? [] : ep;
    if (args.length === 0) rest = image.Cmd ?? [];
  }
  const argv = [...entry, ...rest];
  if (argv.length === 0) {
    throw new InvalidArgument('no command to run: the image has no Entrypoint or Cmd, so set command in the container spec');
  }
  return argv;
}

/** execve(2) refuses one argument or variable over 32 pages (MAX_ARG_STRLEN, with its NUL). */
const MAX_ARG_STRLEN = 32 * 4096;
/** ...and all of them with their pointers over a quarter of the stack limit: 2 MiB under the usual 8 MiB (ARG_MAX). */
const ARG_MAX = 2 * 1024 * 1024;

/**
 * Refuses a command line and environment the kernel would not exec, so the container is refused at
 * CreateContainer with the limit, instead of being created and then failing to start.
 */
export function checkExecSize(argv: readonly string[], env: readonly string[]): void {
  let total = (argv.length + env.length + 2) * 8;
  for (const [what, items] of [['argument', argv], ['environment variable', env]] as const) {
    items.forEach((item, i) => {
      const bytes = Buffer.byteLength(item) + 1;
      if (bytes > MAX_ARG_STRLEN) {
        const name = what === 'argument' ? `argument ${i}` : `environment variable "${item.slice(0, Math.max(0, item.indexOf('=')))}"`;
        throw new InvalidArgument(
          `${name} is ${bytes} bytes long; the kernel runs no command with an argument or variable over ${MAX_ARG_STRLEN} bytes`,
        );
      }
      total += bytes;
    });
  }
  if (total > ARG_MAX) {
    throw new InvalidArgument(
      `the command line and environment take ${total} bytes; ` +
        `the kernel runs no command whose arguments and environment exceed ${ARG_MAX} bytes`,
    );
  }
}

export function withArgs(argv: readonly string[]): SpecOpt {
  return (spec) => { processOf(spec).args = [...argv]; };
}

const keyOf = (entry: string): string => {
  const i = entry.indexOf('=');
  return i < 0 ? entry : entry.slice(0, i);
};

/**
 * Environment in increasing priority: default PATH and HOSTNAME, then the image's, then the
 * config's; a later entry with the same name replaces the earlier one in place.
 */
export function processEnv(
  hostname: string,
  imageEnv: readonly string[],
  configEnv: ReadonlyArray<{ key: string; value: string | Uint8Array }>,
): string[] {
  const env = new Map<string, string>();
  const put = (entry: string): void => { env.set(keyOf(entry), entry); };
  put(`PATH=${DEFAULT_PATH}`);
  if (hostname) put(`HOSTNAME=${hostname}`);
  imageEnv.forEach(put);
  for (const { key, value } of configEnv) {
    if (key === '' || key.includes('=') || key.includes('\0') || envText(value).includes('\0')) {
      throw new InvalidArgument(`environment variable "${key}" is not valid: names must be non-empty without "=" or NUL`);
    }
    put(`${key}=${envText(value)}`);
  }
  return [...env.values()];
}

/**
 * A CRI environment value (bytes since cri-api 1.36) as the spec's text. UTF-8 passes unchanged; a byte
 * that is no UTF-8 becomes U+FFFD here, as runc's JSON reading of the spec would make it anyway (the OCI
 * spec is JSON, which carries only Unicode text): such a value is accepted, as upstream runtimes accept it.
 */
export function envText(value: string | Uint8Array): string {
  return typeof value === 'string' ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8');
}

export function withEnv(env: readonly string[]): SpecOpt {
  return (spec) => { processOf(spec).env = [...env]; };
}

/** The config's working_dir, else the image's WorkingDir, else "/". */
export function processCwd(workingDir: string, image: ImageConfig): string {
  const cwd = workingDir || image.WorkingDir || '/';
  if (!path.posix.isAbsolute(cwd)) {
    throw new InvalidArgument(`working directory "${cwd}" is not absolute: use a path such as /app`);
  }
  return path.posix.resolve(cwd); // absolute already: only normalises
}

export function withCwd(cwd: string): SpecOpt {
  return (spec) => { processOf(spec).cwd = cwd; };
}

export function withTerminal(tty: boolean): SpecOpt {
  return (spec) => { processOf(spec).terminal = tty; };
}

/** Rlimits the runtime is configured to set; none by default, inheriting the daemon's. */
export function withRlimits(rlimits: readonly POSIXRlimit[]): SpecOpt {
  return (spec) => {
    for (const r of rlimits) {
      if (!/^RLIMIT_[A-Z]+$/.test(r.type) || r.soft > r.hard || r.soft < 0) {
        throw new InvalidArgument(`rlimit ${r.type} soft ${r.soft} hard ${r.hard} is invalid: use RLIMIT_<NAME> with 0 <= soft <= hard`);
      }
    }
    if (rlimits.length > 0) processOf(spec).rlimits = rlimits.map((r) => ({ ...r }));
    else delete processOf(spec).rlimits;
  };
}
