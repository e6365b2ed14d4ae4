// Exec, Attach and PortForward: validate the request against our records and answer with a URL on
// the streaming server; and the backend that server runs sessions against.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { connectInNetns, runAttachSession, runExecSession } from '../oci/runtime/exec-session.js';
import { refreshContainer, runtimeOf } from '../pod/container-refresh.js';
import type { Deps } from '../pod/context.js';
import { FailedPrecondition, InvalidArgument } from '../core/errors.js';
import type { ContainerRecord } from '../pod/records.js';
import type { RuntimeHandlers } from './runtime-service.js';
import type { StreamingBackend } from '../streaming/server.js';

async function runningContainer(deps: Deps, id: string, verb: string): Promise<ContainerRecord> {
  const record = await refreshContainer(deps, deps.tables.containers.find(id));
  if (record.state !== 'CONTAINER_RUNNING') {
    throw new FailedPrecondition(`container "${record.id}" is ${record.state}, not running: cannot ${verb} it; start it or pick a running one`);
  }
  return record;
}

function checkStdio(o: { stdin: boolean; stdout: boolean; stderr: boolean; tty: boolean }, what: string): void {
  if (!o.stdin && !o.stdout && !o.stderr) throw new InvalidArgument(`${what}: at least one of stdin, stdout and stderr must be requested`);
  if (o.tty && o.stderr) throw new InvalidArgument(`${what}: tty and stderr cannot both be requested (a terminal merges stderr into stdout)`);
}

export function containerStreamingHandlers(deps: Deps): RuntimeHandlers {
  return {
    Exec: async (r) => {
      if (r.cmd.length === 0) throw new InvalidArgument(`Exec in container "${r.container_id}" needs a command`);
      checkStdio(r, `Exec in container "${r.container_id}"`);
      const record = await runningContainer(deps, r.container_id, 'exec in');
      return { url: deps.streaming.url({ verb: 'exec', containerId: record.id, cmd: r.cmd, tty: r.tty, stdin: r.stdin, stdout: r.stdout, stderr: r.stderr }) };
    },
    Attach: async (r) => {
      checkStdio(r, `Attach to container "${r.container_id}"`);
      const record = await runningContainer(deps, r.container_id, 'attach to');
      if (r.stdin && !record.config.stdin) {
        throw new InvalidArgument(`Attach to container "${record.id}" with stdin: the container was created without stdin; create it with stdin: true`);
      }
      return { url: deps.streaming.url({ verb: 'attach', containerId: record.id, tty: r.tty, stdin: r.stdin, stdout: r.stdout, stderr: r.stderr }) };
    },
    PortForward: (r) => {
      const sandbox = deps.tables.sandboxes.find(r.pod_sandbox_id);
      if (sandbox.state !== 'SANDBOX_READY') {
        throw new FailedPrecondition(`sandbox "${sandbox.id}" is not ready (state ${sandbox.state}): cannot forward ports into it; start a new sandbox`);
      }
      const bad = r.port.find((p) => !Number.isInteger(p) || p < 1 || p > 65535);
      if (bad !== undefined) throw new InvalidArgument(`PortForward to sandbox "${sandbox.id}": port ${bad} is not in 1-65535`);
      return { url: deps.streaming.url({ verb: 'portforward', sandboxId: sandbox.id, ports: r.port }) };
    },
  };
}

/** Runs streaming sessions against the daemon's records and runtimes. */
export function streamingBackend(deps: () => Deps): StreamingBackend {
  const workDir = async () => {
    const dir = join(deps().config.state_dir, 'streaming');
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return dir;
  };
  return {
    exec: async (req, io) => {
      const d = deps();
      // Checked again: the container may have stopped between the CRI call and the connection.
      const record = await runningContainer(d, req.containerId, 'exec in');
      // Interactive exec runs the runtime itself (under the PTY helper), with the runtime's own global flags.
      const cmd = runtimeOf(d, record).commandLine();
      return runExecSession({
        runtimePath: cmd.path, runtimeArgs: cmd.args, id: record.id, cmd: req.cmd, tty: req.tty,
        workDir: await workDir(), log: d.log.child({ module: 'exec' }),
      }, io);
    },
    attach: async (req, io) => {
      const d = deps();
      const record = await runningContainer(d, req.containerId, 'attach to');
      const runtime = runtimeOf(d, record);
      return runAttachSession({
        id: record.id, socketPath: runtime.attachSocketPath(record.id), ctlPath: join(record.dir, 'ctl'),
        log: d.log.child({ module: 'attach' }),
      }, io);
    },
    portForward: async (req) => {
      const sandbox = deps().tables.sandboxes.find(req.sandboxId);
      if (sandbox.state !== 'SANDBOX_READY') throw new FailedPrecondition(`sandbox "${sandbox.id}" is not ready (state ${sandbox.state})`);
      // A host-network pod has no namespace of its own: connect from ours.
      const netns = sandbox.netns?.path ?? '/proc/self/ns/net';
      return (port) => connectInNetns(netns, port);
    },
  };
}
