// CNI CHECK of every attached sandbox, in the background: on a schedule and when a verbose status finds
// the last result stale. The check execs every plugin of the network (tens of milliseconds), so no
// caller waits for it; PodSandboxStatus reports the last result and its age. The schedule checks one
// sandbox at a time, the one checked longest ago, so a node of many pods pays a steady trickle rather than
// a burst of plugin processes that would hold up the pods' own operations.
import type { PodContext } from './context.js';
import { podNetworkRequest } from './network.js';
import type { SandboxRecord } from './records.js';

/** What a verbose status says of a sandbox's network. */
export interface NetworkCheck {
  /** "ok", "not attached", "not checked yet", or why the attachment is not as ADD made it. */
  result: string;
  /** Seconds since the check ran; absent when none has. */
  ageSeconds?: number;
}

/** A result older than this is refreshed when a verbose status asks for it. */
const STALE_MS = 60_000;
/** How often the schedule checks the sandbox checked longest ago. */
const TICK_MS = 30_000;

export class NetworkChecks {
  private readonly last = new Map<string, { result: string; at: number }>();
  private readonly running = new Map<string, Promise<void>>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly ctx: PodContext, private readonly opts: { staleMs?: number; tickMs?: number } = {}) {}

  start(): void {
    this.timer = setInterval(() => void this.checkOldest(), this.opts.tickMs ?? TICK_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all(this.running.values());
  }

  /** The last result and its age; a stale result, or none, starts a check. */
  report(sandbox: SandboxRecord): NetworkCheck {
    if (sandbox.state !== 'SANDBOX_READY' || !sandbox.networkAttached) return { result: 'not attached' };
    const last = this.last.get(sandbox.id);
    if (!last || performance.now() - last.at >= (this.opts.staleMs ?? STALE_MS)) void this.check(sandbox.id);
    return last ? { result: last.result, ageSeconds: Math.round((performance.now() - last.at) / 1000) } : { result: 'not checked yet' };
  }

  /** Checks the attached sandbox checked longest ago (one never checked first); forgets sandboxes that are gone. */
  async checkOldest(): Promise<void> {
    for (const id of this.last.keys()) if (!this.ctx.tables.sandboxes.get(id)) this.last.delete(id);
    const attached = this.ctx.tables.sandboxes.list().filter((s) => s.state === 'SANDBOX_READY' && s.networkAttached);
    const at = (id: string) => this.last.get(id)?.at ?? -Infinity;
    const oldest = attached.reduce<SandboxRecord | undefined>((a, b) => (a && at(a.id) <= at(b.id) ? a : b), undefined);
    if (oldest) await this.check(oldest.id);
  }

  /** One check of one sandbox; one at a time per sandbox. */
  check(id: string): Promise<void> {
    const under = this.running.get(id);
    if (under) return under;
    const run = (async () => {
      const sandbox = this.ctx.tables.sandboxes.get(id);
      if (!sandbox || sandbox.state !== 'SANDBOX_READY' || !sandbox.networkAttached) return;
      const result = await this.ctx.network.checkPod(podNetworkRequest(sandbox)).then(() => 'ok', (err: Error) => err.message);
      this.last.set(id, { result, at: performance.now() });
      if (result !== 'ok') this.ctx.log.warn({ sandboxId: id, result }, 'the pod network is not as CNI ADD made it');
    })().finally(() => this.running.delete(id));
    this.running.set(id, run);
    return run;
  }
}
