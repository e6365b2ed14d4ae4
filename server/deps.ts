// What the RPC handlers are given: the daemon's configuration, state and domain modules.
import type { Config } from './config.js';
import type { Logger } from './log.js';
import type { Store } from './store.js';

/** The network layer as Status and UpdateRuntimeConfig see it. */
export interface NetworkReadiness {
  status(): Promise<{ ready: boolean; reason: string; message: string }>;
  setPodCidr(cidr: string): void;
}

export interface Deps {
  config: Config;
  store: Store;
  log: Logger;
  network: NetworkReadiness;
  /** The daemon's version, from package.json. */
  version: string;
}
