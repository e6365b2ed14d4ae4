// hostile: the daemon's responsiveness while the worst streaming clients of #31 run at once, against
// minicri: two SPDY and one WebSocket stdin flood into a process that never reads, a loop of port-forward
// sessions each sending a 16 MiB SPDY frame, and a port-forward session opening stream pairs as fast as it can.
//
// The event loop's delay is measured from outside: Version round trips back to back (a call that does no
// work but go through the loop), before and during the attack. Its p99 during the attack, less the idle
// one, is what the attack costs every other client of the daemon. (Inside the daemon it would take the
// metrics endpoint, which loads prom-client and changes the footprint the other benches measure.)
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { encodeData } from '../streaming/spdy-frames.js';
import { readAll, spdyConnect, spdyRemoteCommand, wsConnect } from '../test/support/streaming-client.js';
import { benchContainer, benchPod } from './lib/pods.js';
import { now, round, since, summarize, type Summary } from './lib/stats.js';
import type { Target } from './lib/targets.js';

export interface HostileResult {
  attackSeconds: number;
  /** Version round trips (ms) with nothing else running, then during the attack. */
  idle: Summary;
  attack: Summary;
  /** Daemon RSS: its peak during the attack over its value before (MiB). */
  rssGrowthMiB: number;
  /** What the floods got out before back-pressure stopped them (MiB, all three). */
  stdinSentMiB: number;
  framesRefused: number;
  pairsRefused: number;
  errors: string[];
}

const CHUNK = Buffer.alloc(64 * 1024, 0x5a);

function rssKiB(pid: number): number {
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
}

export async function hostileBench(target: Target, image: string, logRoot: string, seconds: number): Promise<HostileResult> {
  const rt = target.client.runtime;
  const config = benchPod('hostile', logRoot);
  const errors: string[] = [];
  const { pod_sandbox_id: pod } = await rt.call('RunPodSandbox', { config });
  const closers: (() => void)[] = [];
  let stop = false;
  try {
    const { container_id: id } = await rt.call('CreateContainer', { pod_sandbox_id: pod, config: benchContainer('victim', image), sandbox_config: config });
    await rt.call('StartContainer', { container_id: id });
    const execUrl = async (stdin: boolean) => (await rt.call('Exec', { container_id: id, cmd: ['sleep', '3600'], stdin, stdout: true, stderr: true, tty: false })).url;
    const versions = async (ms: number) => {
      const samples: number[] = [];
      for (const end = Date.now() + ms; Date.now() < end;) {
        const t0 = now();
        await rt.call('Version', {});
        samples.push(since(t0));
      }
      return samples;
    };
    await versions(500); // warm-up
    const idle = await versions(Math.min(5000, seconds * 500));

    let sent = 0;
    const floodLoop = async (write: (chunk: Buffer) => Promise<void>) => {
      while (!stop) {
        await write(CHUNK);
        sent += CHUNK.length;
      }
    };
    const attacks: Promise<unknown>[] = [];
    // A client whose session the daemon closed fails its next write: expected once the attack stops, an error before.
    const attack = (run: () => Promise<void>) => attacks.push(run().catch((err: Error) => { if (!stop) errors.push(err.message); }));
    for (let i = 0; i < 2; i++) {
      const s = await spdyRemoteCommand(await execUrl(true), { stdin: true, stdout: true, stderr: true });
      closers.push(() => s.conn.session.destroy());
      attack(() => floodLoop((c) => new Promise((resolve, reject) => s.stdin!.write(c, (err) => (err ? reject(err) : resolve())))));
    }
    const ws = await wsConnect(await execUrl(true), ['v5.channel.k8s.io']);
    closers.push(() => ws.ws.terminate());
    const wsChunk = Buffer.concat([Buffer.from([0]), CHUNK]);
    attack(() => floodLoop(() => new Promise((resolve, reject) => ws.ws.send(wsChunk, (err) => (err ? reject(err) : resolve())))));

    let framesRefused = 0;
    const frame = encodeData(1, Buffer.alloc(16 * 1024 * 1024 - 1), false);
    attack(async () => {
      while (!stop) {
        const { session, socket } = await spdyConnect((await rt.call('PortForward', { pod_sandbox_id: pod, port: [] })).url, ['portforward.k8s.io']);
        closers.push(() => session.destroy());
        const closed = once(session, 'close');
        socket.write(frame);
        await closed;
        framesRefused++;
      }
    });

    let pairsRefused = 0;
    attack(async () => {
      const { session } = await spdyConnect((await rt.call('PortForward', { pod_sandbox_id: pod, port: [] })).url, ['portforward.k8s.io']);
      closers.push(() => session.destroy());
      for (let i = 0; !stop; i++) {
        const error = await session.openStream({ streamtype: 'error', port: '80', requestid: String(i) });
        const data = session.openStream({ streamtype: 'data', port: '80', requestid: String(i) });
        void readAll(error).then((text) => { if (/max_port_forward_pairs/.test(text)) pairsRefused++; });
        await data.then((d) => d.end(), () => undefined);
      }
    });

    const pid = target.pid;
    const rssBefore = rssKiB(pid);
    let rssPeak = rssBefore;
    const sampler = setInterval(() => { rssPeak = Math.max(rssPeak, rssKiB(pid)); }, 100);
    const a0 = now();
    const during = await versions(seconds * 1000);
    const attackSeconds = round(since(a0) / 1000);
    clearInterval(sampler);
    stop = true;
    for (const close of closers) close();
    // Each attacker fails or ends once its session is gone; the bound only keeps a stuck one from hanging the run.
    await Promise.race([Promise.all(attacks), sleep(10_000)]);
    return {
      attackSeconds, idle: summarize(idle), attack: summarize(during),
      rssGrowthMiB: round((rssPeak - rssBefore) / 1024, 1), stdinSentMiB: round(sent / 2 ** 20, 1), framesRefused, pairsRefused, errors,
    };
  } finally {
    stop = true;
    for (const close of closers) close();
    await rt.call('StopPodSandbox', { pod_sandbox_id: pod }).catch(() => undefined);
    await rt.call('RemovePodSandbox', { pod_sandbox_id: pod }).catch(() => undefined);
  }
}
