// What every operation of the pod domain is given: its settings, its records and locks, and the narrow
// interfaces to the network, the OCI runtimes, images and the host.
import type { Background } from '../core/background.js';
import type { KeyedLock } from '../core/locks.js';
import type { Logger } from '../core/log.js';
import type { HandlerFeatures } from '../oci/runtime/features.js';
import type { HostFacts, ImageConfig as SpecImageConfig } from '../oci/runtime/spec/index.js';
import type { EventHub } from './event-hub.js';
import type { PodEvent } from './events.js';
import type { ContainerRuntime, PodCdi, PodHost, PodImages, PodNetwork } from './interfaces.js';
import type { Tables } from './records.js';

/** The image a sandbox's pause container runs. */
export interface PauseImage {
  id: string;
  name: string;
  config: SpecImageConfig;
}

/** The daemon settings the domain reads (the daemon's Config has them under the same names). */
export interface PodSettings {
  root_dir: string;
  /** Where containers' writable layers live when not in root_dir (see oci/image/storage-dirs.ts). */
  writable_layers_dir?: string | undefined;
  state_dir: string;
  netns_dir: string;
  cgroup_driver: 'cgroupfs' | 'systemd';
  default_runtime: string;
  cni: { cache_dir: string; conf_dir: string; networks_dir: string };
  /** Refuse user-namespace mappings onto the host's own ids (below 65536) instead of warning. */
  userns_refuse_host_id_overlap?: boolean;
  /** How old a writable layer's usage a stats call may answer (default 10 s). */
  writable_layer_usage_max_age_seconds?: number;
  /** Containers restored from checkpoint archives (container-restore.ts); absent: off. */
  restore?: { enabled: boolean; archive_dir: string; max_archive_bytes: number; allow_foreign_archives: boolean };
}

export interface PodContext {
  settings: PodSettings;
  tables: Tables;
  /** Serializes operations on one sandbox or container (keyed by id or reservation). */
  locks: KeyedLock;
  /** The container events of every state change (GetContainerEvents subscribes here). */
  events: EventHub<PodEvent>;
  /** What operations finish after their answer (a removed container's cleanup); shutdown waits for it. */
  background: Background;
  log: Logger;
  network: PodNetwork;
  /** One OCI runtime per configured handler name. */
  runtimes: Map<string, ContainerRuntime>;
  images: PodImages;
  host: PodHost;
  /** The CDI spec files of the node. */
  cdi: PodCdi;
  /** The configured pause image (pulled on first use) or the built-in one. */
  pauseImage(log: Logger): Promise<PauseImage>;
  /** What spec building needs to know of this node, with the passwd and group files of `rootfs` (made from `image`, named in errors). */
  hostFacts(rootfs: string, image: string): Promise<HostFacts>;
  /** What each handler supports on this node (probed at start); a handler absent here supports none of it. */
  runtimeFeatures?: ReadonlyMap<string, HandlerFeatures>;
}
