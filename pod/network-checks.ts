// CNI CHECK of every attached sandbox, in the background: on a schedule and when a verbose status finds
// the last result stale. The check execs every plugin of the network (tens of milliseconds), so no
// caller waits for it; PodSandboxStatus reports the last result and its age.
import type { PodContext } from './context.js';
import { podNetworkRequest } from './network.js';
import type { SandboxRecord } from './records.js';
import { pool } from '../core/pool.js';

/** What a verbose status says of a sandbox's network. */
export interface NetworkCheck {
  /** "ok", "not attached", "not checked yet", or why the attachment is not as ADD made it. */
  result: string;
  /** Seconds since the check ran; absent when none has. */
  ageSeconds?: number;
}

const INTERVAL_MS = 60_000;
/** Checks at once: each runs plugin processes. */
const CONCURRENCY = 2;

export class NetworkChecks {
  private readonly last = new Map<string, { result: string; at: number }>();
  private readonly running = new Map<string, Promise<void>>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly ctx: PodContext, private readonly intervalMs = INTERVAL_MS) {}

  start(): void {
    this.timer = setInterval(() => void this.checkAll(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all(this.running.values());
  }

  /** The last result and its age; a result older than the interval, or none, starts a check. */
  report(sandbox: SandboxRecord): NetworkCheck {
    if (sandbox.state !== 'SANDBOX_READY' || !sandbox.networkAttached) return { result: 'not attached' };
    const last = this.last.get(sandbox.id);
    if (!last || Date.now() - last.at >= this.intervalMs) void this.check(sandbox.id);
    return last ? { result: last.result, ageSeconds: Math.round((Date.now() - last.at) / 1000) } : { result: 'not checked yet' };
  }

  /** Checks every attached sandbox once, a few at a time; forgets the results of sandboxes that are gone. */
  async checkAll(): Promise<void> {
    for (const id of this.last.keys()) if (!this.ctx.tables.sandboxes.get(id)) this.last.delete(id);
    const attached = this.ctx.tables.sandboxes.list().filter((s) => s.state === 'SANDBOX_READY' && s.networkAttached);
    await pool(attached, CONCURRENCY, (s) => this.check(s.id));
  }

  /** One check of one sandbox; one at a time per sandbox. */
  check(id: string): Promise<void> {
    const under = this.running.get(id);
    if (under) return under;
    const run = (async () => {
      const sandbox = this.ctx.tables.sandboxes.get(id);
      if (!sandbox || sandbox.state !== 'SANDBOX_READY' || !sandbox.networkAttached) return;
      const result = await this.ctx.network.checkPod(podNetworkRequest(sandbox)).then(() => 'ok', (err: Error) => err.message);
      this.last.set(id, { result, at: Date.now() });
      if (result !== 'ok') this.ctx.log.warn({ sandboxId: id, result }, 'the pod network is not as CNI ADD made it');
    })().finally(() => this.running.delete(id));
    this.running.set(id, run);
    return run;
  }
}
