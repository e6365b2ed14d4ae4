// Exec, Attach and PortForward: what the CRI calls check before a streaming URL is issued, and the
// sessions themselves, run when the client connects to that URL.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { FailedPrecondition, InvalidArgument } from '../core/errors.js';
import type { SessionStdio } from '../core/stdio.js';
import type { Subprocess } from '../core/spawn.js';
import { connectInNetns, runAttachSession, runExecSession } from '../oci/runtime/exec-session.js';
import { runningContainer, runtimeOf } from './container-refresh.js';
import type { PodContext } from './context.js';
import type { ContainerRecord, SandboxRecord } from './records.js';

interface StdioRequest { stdin: boolean; stdout: boolean; stderr: boolean; tty: boolean }

function checkStdio(o: StdioRequest, what: string): void {
  if (!o.stdin && !o.stdout && !o.stderr) throw new InvalidArgument(`${what}: at least one of stdin, stdout and stderr must be requested`);
  if (o.tty && o.stderr) {
    throw new InvalidArgument(`${what}: tty and stderr cannot both be requested (a terminal merges stderr into stdout)`);
  }
}

/** The running container an Exec may run `cmd` in. */
export async function execTarget(ctx: PodContext, containerId: string, cmd: string[], stdio: StdioRequest): Promise<ContainerRecord> {
  if (cmd.length === 0) throw new InvalidArgument(`Exec in container "${containerId}" needs a command`);
  checkStdio(stdio, `Exec in container "${containerId}"`);
  return runningContainer(ctx, containerId, 'exec in');
}

/** The running container an Attach may join. */
export async function attachTarget(ctx: PodContext, containerId: string, stdio: StdioRequest): Promise<ContainerRecord> {
  checkStdio(stdio, `Attach to container "${containerId}"`);
  const record = await runningContainer(ctx, containerId, 'attach to');
  if (stdio.stdin && !record.config.stdin) {
    throw new InvalidArgument(
      `Attach to container "${record.id}" with stdin: the container was created without stdin; create it with stdin: true`,
    );
  }
  return record;
}

/** The ready sandbox a PortForward may reach. */
export function portForwardTarget(ctx: PodContext, sandboxId: string, ports: number[]): SandboxRecord {
  const sandbox = readySandbox(ctx, sandboxId, 'forward ports into it');
  const bad = ports.find((p) => !Number.isInteger(p) || p < 1 || p > 65535);
  if (bad !== undefined) throw new InvalidArgument(`PortForward to sandbox "${sandbox.id}": port ${bad} is not in 1-65535`);
  return sandbox;
}

function readySandbox(ctx: PodContext, sandboxId: string, verb: string): SandboxRecord {
  const sandbox = ctx.tables.sandboxes.find(sandboxId);
  if (sandbox.state !== 'SANDBOX_READY') {
    throw new FailedPrecondition(`sandbox "${sandbox.id}" is not ready (state ${sandbox.state}): cannot ${verb}; start a new sandbox`);
  }
  return sandbox;
}

async function sessionDir(ctx: PodContext): Promise<string> {
  const dir = join(ctx.settings.state_dir, 'streaming');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/** Runs an exec session; resolves with the command's exit code. */
export async function runExec(ctx: PodContext, containerId: string, cmd: string[], tty: boolean, io: SessionStdio): Promise<number> {
  // Checked again: the container may have stopped between the CRI call and the connection.
  const record = await runningContainer(ctx, containerId, 'exec in');
  // Interactive exec runs the runtime itself (under the PTY helper), with the runtime's own global flags.
  const command = runtimeOf(ctx, record).commandLine();
  return runExecSession({
    runtimePath: command.path, runtimeArgs: command.args, id: record.id, cmd, tty,
    workDir: await sessionDir(ctx), log: ctx.log.child({ module: 'exec' }),
  }, io);
}

export async function runAttach(ctx: PodContext, containerId: string, io: SessionStdio): Promise<void> {
  const record = await runningContainer(ctx, containerId, 'attach to');
  return runAttachSession({
    id: record.id, socketPath: runtimeOf(ctx, record).attachSocketPath(record.id), ctlPath: join(record.dir, 'ctl'),
    log: ctx.log.child({ module: 'attach' }),
  }, io);
}

/** Connects to ports inside the sandbox's network namespace (a host-network pod's are the node's). */
export function podConnector(ctx: PodContext, sandboxId: string): (port: number) => Subprocess {
  const sandbox = readySandbox(ctx, sandboxId, 'forward ports into it');
  const netns = sandbox.netns?.path ?? '/proc/self/ns/net';
  return (port) => connectInNetns(netns, port);
}
