// Assembles the daemon: state, domain modules, the two CRI services on one unix socket; and takes it down.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Config } from './config.js';
import type { Deps } from './deps.js';
import { imageService } from './image-service.js';
import { claimSocketPath, listenUnix } from './listen.js';
import type { Logger } from './log.js';
import { loadCri } from './proto.js';
import { runtimeService } from './runtime-service.js';
import { bindService } from './service.js';
import { Store } from './store.js';

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
  mkdirSync(config.root_dir, { recursive: true, mode: 0o711 });
  mkdirSync(config.state_dir, { recursive: true, mode: 0o711 });
  const store = Store.open(join(config.root_dir, 'minicri.db'));
  try {
    const deps: Deps = {
      config,
      store,
      log,
      version: VERSION,
      network: {
        status: async () => ({ ready: false, reason: 'NetworkPluginNotReady', message: 'minicri has no CNI network manager yet' }),
        setPodCidr: () => {},
      },
    };
    const cri = loadCri();
    const server = new grpc.Server({
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
    });
    server.addService(cri.RuntimeService.service, bindService('runtime.v1.RuntimeService', cri.RuntimeService.service, runtimeService(deps), log));
    server.addService(cri.ImageService.service, bindService('runtime.v1.ImageService', cri.ImageService.service, imageService(deps), log));
    const listener = await listenUnix(server, config.socket);
    log.info({ socket: config.socket, version: VERSION }, 'minicri serving');

    return {
      stop: async () => {
        await listener.close();
        await new Promise<void>((resolve) => {
          const force = setTimeout(() => { server.forceShutdown(); resolve(); }, SHUTDOWN_GRACE_MS);
          server.tryShutdown(() => { clearTimeout(force); resolve(); });
        });
        store.close();
        log.info('minicri stopped');
      },
    };
  } catch (err) {
    store.close();
    throw err;
  }
}
