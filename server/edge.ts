// What the RPC handlers are given: the pod domain, the image service, and what only the edge has
// (the configuration, the streaming server's URLs, the relist encoders).
import type { Images } from '../oci/image/images.js';
import type { ApparmorSetup } from '../oci/runtime/apparmor/loader.js';
import type { PodContext } from '../pod/context.js';
import type { NetworkChecks } from '../pod/network-checks.js';
import type { PodCidrStore } from '../pod/runtime-status.js';
import type { StreamingEndpoint } from '../streaming/server.js';
import type { Config } from './config.js';
import type { ListEncoders } from './list-encoding.js';

export interface Edge {
  config: Config;
  /** The daemon's version, from package.json. */
  version: string;
  pods: PodContext;
  /** The pods' CNI CHECKs, run in the background. */
  networkChecks: NetworkChecks;
  images: Images;
  /** Keeps the pod CIDR kubelet gives across restarts. */
  meta: PodCidrStore;
  /** Issues exec/attach/port-forward URLs on the streaming server. */
  streaming: StreamingEndpoint;
  /** Encodes the relist answers item by item; the list handlers keep them warm. */
  lists: ListEncoders;
  /** AppArmor as start found it and left it (the default profile loaded or why not). */
  apparmor: ApparmorSetup;
}
