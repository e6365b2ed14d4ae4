// Starts the daemon: the store, then the socket with both CRI services (Version answers from then on), then the
// rest (assemble.ts, loaded only now) behind them; and takes it all down.
import { chmodSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../core/log.js';
import { Timeline } from '../core/timeline.js';
import { assertRootfsDirKept, storageDirs } from '../oci/image/storage-dirs.js';
import { Store } from '../store/store.js';
import type { Assembled } from './assemble.js';
import type { Config } from './config.js';
import { Version } from './handlers/version.js';
import { claimSocketPath, listenUnix, type UnixListener } from './listen.js';
import { listEncoders, withListEncoders } from './list-encoding.js';
import type { Metrics } from './metrics.js';
import { loadCri } from './proto.js';
import type { RpcObserver } from './rpc.js';
import { afterStart, bindService } from './service.js';

/** kubelet sends and accepts messages up to 16 MiB (ExecSync output, large lists). */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
/** How long in-flight calls get to finish on shutdown before their connections are cut. */
const SHUTDOWN_GRACE_MS = 10_000;

export const VERSION: string = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;

export interface RunningDaemon {
  stop(): Promise<void>;
}

export async function startDaemon(config: Config, log: Logger): Promise<RunningDaemon> {
  await claimSocketPath(config.socket);
  // Pods' specs (their environments: Secret values), the database and image layers are root's alone;
  // an install made with looser modes is tightened here.
  const dirs = storageDirs(config);
  for (const dir of [config.root_dir, config.state_dir, dirs.writableLayers]) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
  }
  const t = new Timeline();
  const store = Store.open(join(config.root_dir, 'minicri.db'));
  t.mark('store');
  let metrics: Metrics | undefined;
  let listener: UnixListener | undefined;
  // The socket opens before the rest of the start: Version (kubelet's first call, its sign that the runtime is
  // there) answers at once, and every other call waits for the start to end, recovery included, so nothing is
  // answered from records recovery has not made true yet.
  let started!: (handlers: Assembled) => void;
  let failed!: (err: unknown) => void;
  const ready = new Promise<Assembled>((resolve, reject) => { started = resolve; failed = reject; });
  const server = new grpc.Server({
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
  });
  try {
    // The writable layers' place is remembered: a move that would strand root filesystems stops the start.
    await assertRootfsDirKept(store.getMeta('rootfs_dir'), dirs, config.root_dir);
    store.setMeta('rootfs_dir', dirs.rootfs);
    const cri = loadCri();
    const lists = listEncoders(cri.RuntimeService.service);
    const observe: RpcObserver = (rpc, code) => metrics?.observe(rpc, code);
    server.addService(
      withListEncoders(cri.RuntimeService.service, lists),
      bindService('runtime.v1.RuntimeService', cri.RuntimeService.service,
        afterStart(cri.RuntimeService.service, ready.then((h) => h.runtime), { Version: Version({ version: VERSION }) }),
        log, observe),
    );
    server.addService(
      cri.ImageService.service,
      bindService('runtime.v1.ImageService', cri.ImageService.service,
        afterStart(cri.ImageService.service, ready.then((h) => h.image), {}), log, observe),
    );
    listener = await listenUnix(server, config.socket);
    t.mark('listen');
    const listeningMs = Math.round(process.uptime() * 1000);
    const { assemble } = await import('./assemble.js');
    t.mark('load');
    const running = await assemble({ config, log, store, version: VERSION, lists, t });
    metrics = running.metrics;
    started(running);
    // Since the process began (module loading included), and each step's share: a slow start explains itself.
    // listeningMs: when Version began to answer; startMs: when every call did.
    const startMs = Math.round(process.uptime() * 1000);
    log.info({ socket: config.socket, version: VERSION, listeningMs, startMs, ms: t.ms }, 'minicri serving');

    return {
      stop: async () => {
        // Stop accepting, then let grpc-js finish in-flight calls and close the connections it holds;
        // the listener's close completes only once those connections are gone, so it is awaited last.
        const closed = listener!.close();
        // Event streams never end on their own: they end now, so the server's shutdown does not wait for them.
        await running.closeStreams();
        await new Promise<void>((resolve) => {
          const force = setTimeout(() => { server.forceShutdown(); resolve(); }, SHUTDOWN_GRACE_MS);
          server.tryShutdown(() => { clearTimeout(force); resolve(); });
        });
        await closed;
        await running.stop();
        store.close();
        log.info('minicri stopped');
      },
    };
  } catch (err) {
    failed(err);
    // Connections first (kubelet's, open since its Version call): the listener's close waits for them.
    server.forceShutdown();
    await listener?.close();
    store.close();
    throw err;
  }
}
