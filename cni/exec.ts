// Running one CNI plugin binary: environment per the CNI spec, config on stdin, a bounded run time,
// and errors that name the plugin and carry its stderr and CNI error object.
import path from 'node:path';
import { findExecutable } from '../core/executables.js';
import type { Logger } from '../core/log.js';
import { run, type RunResult } from '../core/spawn.js';
import { DeadlineExceeded, FailedPrecondition, Internal } from '../core/errors.js';
import { isObject } from './config.js';

export type CniCommand = 'ADD' | 'DEL' | 'CHECK' | 'STATUS' | 'GC' | 'VERSION';

export interface PluginCall {
  command: CniCommand;
  pluginType: string;
  network: string;
  containerId?: string;
  netns?: string;
  ifName?: string;
  args?: string;
  stdin: Buffer;
}

export interface ExecOptions {
  binDirs: string[];
  timeoutMs: number;
  log: Logger;
}

/** A plugin exited non-zero; `cniCode`/`cniMsg`/`cniDetails` come from the error JSON it printed, if any. */
export class CniPluginError extends Internal {
  constructor(
    message: string,
    readonly plugin: string,
    readonly command: CniCommand,
    readonly stderr: string,
    readonly cniCode?: number,
    readonly cniMsg?: string,
    readonly cniDetails?: string,
  ) {
    super(message);
  }
}

/** Absolute path of the plugin binary: the first executable `<dir>/<type>` in bin dir order. */
export function findPlugin(type: string, binDirs: string[]): string | undefined {
  return findExecutable(binDirs.map((dir) => path.join(dir, type)));
}

/** The environment of a plugin call; inherited CNI_* variables are dropped so none leaks into a call. */
export function pluginEnv(call: PluginCall, binDirs: string[], base: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) if (v !== undefined && !k.startsWith('CNI_')) env[k] = v;
  env.CNI_COMMAND = call.command;
  env.CNI_PATH = binDirs.join(':');
  if (call.containerId !== undefined) env.CNI_CONTAINERID = call.containerId;
  if (call.netns !== undefined) env.CNI_NETNS = call.netns;
  if (call.ifName !== undefined) env.CNI_IFNAME = call.ifName;
  if (call.args !== undefined) env.CNI_ARGS = call.args;
  return env;
}

/** Runs the plugin; returns its parsed stdout JSON (undefined when it printed nothing). */
export async function execPlugin(call: PluginCall, opts: ExecOptions): Promise<unknown> {
  const sandbox = call.containerId ? `, sandbox ${call.containerId.slice(0, 12)}` : '';
  const what = `CNI plugin "${call.pluginType}" (network "${call.network}"${sandbox}) ${call.command}`;
  const binary = findPlugin(call.pluginType, opts.binDirs);
  if (!binary) {
    const dirs = opts.binDirs.join(':');
    throw new FailedPrecondition(`${what}: plugin binary "${call.pluginType}" not found in ${dirs}: install it or fix the CNI config`);
  }
  const started = performance.now();
  // Own process group, so a timeout kills the plugin together with whatever it spawned
  // (iptables, a hung helper) and nothing keeps its output pipes open.
  let result: RunResult | Error;
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  try {
    result = await run(binary, [], {
      input: call.stdin,
      env: pluginEnv(call, opts.binDirs, process.env),
      detached: true,
      signal: timeout,
    });
  } catch (err) {
    result = err as Error;
  }
  const ms = Math.round(performance.now() - started);
  const exitCode = result instanceof Error ? undefined : result.code;
  opts.log.debug({ plugin: call.pluginType, command: call.command, network: call.network, ms, exitCode }, 'CNI plugin call');
  const stdout = result instanceof Error ? '' : result.stdout;
  const stderr = result instanceof Error ? '' : result.stderr.trim();
  if (!(result instanceof Error) && result.aborted) {
    throw new DeadlineExceeded(`${what} did not finish within ${opts.timeoutMs}ms and was killed${stderr ? `; stderr: ${stderr}` : ''}`);
  }
  if (exitCode !== 0) {
    const cniErr = parseCniError(stdout);
    const detail = cniErr
      ? `code ${cniErr.code}: ${cniErr.msg}${cniErr.details ? ` (${cniErr.details})` : ''}`
      : result instanceof Error
        ? `could not run: ${result.message}`
        : exitCode === null
          ? `killed by ${result.signal}`
          : `exit status ${exitCode}${stdout.trim() ? `, output: ${stdout.trim().slice(0, 2000)}` : ''}`;
    throw new CniPluginError(
      `${what} failed: ${detail}${stderr ? `; stderr: ${stderr.slice(0, 4000)}` : ''}`,
      call.pluginType,
      call.command,
      stderr,
      cniErr?.code,
      cniErr?.msg,
      cniErr?.details,
    );
  }
  if (stdout.trim() === '') return undefined;
  try {
    return JSON.parse(stdout);
  } catch {
    throw new CniPluginError(`${what} printed invalid JSON: ${stdout.slice(0, 2000)}`, call.pluginType, call.command, stderr);
  }
}

/** The CNI error object (`{"code":N,"msg":...}`) a failing plugin prints on stdout, if it did. */
export function parseCniError(stdout: string): { code: number; msg: string; details?: string } | undefined {
  try {
    const obj: unknown = JSON.parse(stdout);
    if (isObject(obj) && typeof obj.code === 'number') {
      return {
        code: obj.code,
        msg: typeof obj.msg === 'string' ? obj.msg : '',
        ...(typeof obj.details === 'string' && obj.details !== '' ? { details: obj.details } : {}),
      };
    }
  } catch {
    // not JSON: the caller reports raw output
  }
  return undefined;
}
