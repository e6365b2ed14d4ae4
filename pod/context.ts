// What the RPC handlers are given: the daemon's configuration, state and domain modules.
import type { CniManager } from '../cni/manager.js';
import type { Images } from '../oci/image/images.js';
import type { OciRuntime } from '../oci/runtime/runc.js';
import type { HostFacts, ImageConfig as SpecImageConfig } from '../oci/runtime/spec/index.js';
import type { Config } from '../server/config.js';
import type { KeyedLock } from '../core/locks.js';
import type { Logger } from '../core/log.js';
import type { Tables } from './records.js';
import type { Store } from '../store/store.js';
import type { StreamingEndpoint } from '../streaming/server.js';

/** The image a sandbox's pause container runs. */
export interface PauseImage {
  id: string;
  name: string;
  config: SpecImageConfig;
}

export interface Deps {
  config: Config;
  store: Store;
  log: Logger;
  /** The daemon's version, from package.json. */
  version: string;
  tables: Tables;
  /** Serializes operations on one sandbox or container (keyed by id or reservation). */
  locks: KeyedLock;
  cni: CniManager;
  /** One OCI runtime per configured handler name. */
  runtimes: Map<string, OciRuntime>;
  images: Images;
  /** The configured pause image (pulled on first use) or the built-in one. */
  pauseImage(log: Logger): Promise<PauseImage>;
  /** What spec building needs to know of this node, with the passwd and group files of `rootfs`. */
  hostFacts(rootfs: string): Promise<HostFacts>;
  /** Issues exec/attach/port-forward URLs on the streaming server. */
  streaming: StreamingEndpoint;
}
