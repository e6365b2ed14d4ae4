// The daemon behind its socket: images, the pod network, the runtimes, the node's facts, the streaming server and
// the pod domain, recovered from the store and the host; and the handlers of both CRI services over them. Loaded
// by daemon.ts only once the socket is open, so a start reads this code (most of the daemon's) after Version
// already answers.
import { chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { CdiRegistry } from '../cdi/registry.js';
import { ensureDefaultNetwork } from '../cni/default-network.js';
import { CniManager } from '../cni/manager.js';
import { PodResourcesClient } from '../cni/pod-resources.js';
import { Background } from '../core/background.js';
import { KeyedLock } from '../core/locks.js';
import { loadMallocTrim } from '../core/malloc-trim.js';
import type { Logger } from '../core/log.js';
import type { Timeline } from '../core/timeline.js';
import { Images, type PullIntent } from '../oci/image/images.js';
import { storageDirs } from '../oci/image/storage-dirs.js';
import type { ImageRecord } from '../oci/image/types.js';
import { unifiedCgroups } from '../oci/runtime/cgroups.js';
import { probeHandlerFeatures, probeKernelFeatures } from '../oci/runtime/features.js';
import { setUpApparmor } from '../oci/runtime/apparmor/loader.js';
import { gatherNodeFacts } from '../oci/runtime/host-facts.js';
import { usernsStagingDir } from '../oci/runtime/userns.js';
import type { PodContext } from '../pod/context.js';
import { podEvents } from '../pod/events.js';
import { recordExitsAsTheyHappen } from '../pod/exits.js';
import { hostMechanics } from '../pod/host.js';
import { imageUsedBy } from '../pod/image-users.js';
import { NetworkChecks } from '../pod/network-checks.js';
import { pauseImageSource } from '../pod/pause-image.js';
import { Retrier } from '../pod/pending.js';
import { openTables } from '../pod/records.js';
import { recover, sweepOrphans } from '../pod/recovery.js';
import { podCidr } from '../pod/runtime-status.js';
import type { Store } from '../store/store.js';
import { StreamingServer } from '../streaming/server.js';
import type { Config } from './config.js';
import type { Edge } from './edge.js';
import { imageService } from './image-service.js';
import type { ListEncoders } from './list-encoding.js';
import { startMetrics, type Metrics } from './metrics.js';
import { warmUpPullsWhenQuiet } from './pull-warm-up.js';
import { quietCollector } from './quiet-collector.js';
import { runtimeService } from './runtime-service.js';
import { openRuntimes } from './runtimes.js';
import type { ImageHandlers, RuntimeHandlers } from './service.js';
import { streamingBackend, streamingLimits } from './streaming-backend.js';

export interface AssembleOptions {
  config: Config;
  log: Logger;
  store: Store;
  version: string;
  lists: ListEncoders;
  /** The start's timeline, each step marked on it. */
  t: Timeline;
}

export interface Assembled {
  runtime: RuntimeHandlers;
  image: ImageHandlers;
  metrics?: Metrics;
  /** Ends the event streams (with UNAVAILABLE, so kubelet reconnects), the streaming server and the pull warm-up. */
  closeStreams(): Promise<void>;
  /** Stops the rest once no call runs any more: the sweep, retries, background work, runtimes, network. */
  stop(): Promise<void>;
}

export async function assemble({ config, log, store, version, lists, t }: AssembleOptions): Promise<Assembled> {
  const dirs = storageDirs(config);
  let cni: CniManager | undefined;
  let streaming: StreamingServer | undefined;
  let metrics: Metrics | undefined;
  try {
    const tables = openTables(store);
    const imageRecords = store.table<ImageRecord>('image');
    const locks = new KeyedLock();
    const background = new Background(log.child({ module: 'background' }));
    const memoryLog = log.child({ module: 'memory' });
    const collector = quietCollector(memoryLog, { busy: () => locks.busy });
    const noTrim = loadMallocTrim();
    if (noTrim) {
      memoryLog.warn({ why: noTrim }, 'memory freed after pulls stays with the daemon: its malloc_trim addon did not load '
        + '(run npm run build)');
    }
    for (const table of [tables.sandboxes, tables.containers, imageRecords]) table.onChange(() => collector.changed());
    const runtimes = await t.step('runtimes', () => openRuntimes(config, log));
    for (const runtime of runtimes.values()) runtime.watchExits();
    // Searchable by a user-namespaced pod's root on its way to its own entry (see oci/runtime/userns.ts).
    const stagingDir = usernsStagingDir(config.state_dir);
    mkdirSync(stagingDir, { recursive: true, mode: 0o711 });
    chmodSync(stagingDir, 0o711);
    // One reading of the CDI spec dirs for containers' devices and for the devices of DRA-backed networks.
    const cdi = new CdiRegistry(config.cdi.spec_dirs, log.child({ module: 'cdi' }));
    // Images, the network and the node's facts do not depend on each other: side by side, a start waits for
    // the longest of them (a probe's process) rather than for their sum.
    const [images, , [apparmor, node, runtimeFeatures]] = await Promise.all([
      t.step('images', () => Images.open({
        rootDir: dirs.images,
        rootfsDir: dirs.rootfs,
        repo: imageRecords,
        pulls: store.table<PullIntent>('image-pull'),
        registries: {
          insecure: config.registries.insecure,
          mirrors: Object.fromEntries(Object.entries(config.registries.mirrors)
            .map(([host, m]) => [host, { endpoints: m.endpoints, mirrorsOnly: m.mirrors_only }])),
          authFile: config.registries.auth_file,
          certsDir: config.registries.certs_dir,
        },
        stallTimeoutMs: config.registries.stall_timeout_seconds * 1000,
        progressIntervalMs: config.registries.progress_interval_seconds * 1000,
        writableUsageMaxAgeMs: config.writable_layer_usage_max_age_seconds * 1000,
        keepLayerBlobs: config.keep_layer_blobs,
        maxConcurrentDownloads: config.registries.max_concurrent_downloads,
        limits: {
          responseBytes: config.registries.max_response_bytes, manifestBytes: config.registries.max_manifest_bytes,
          configBytes: config.registries.max_config_bytes, layers: config.registries.max_layers,
          tokenCacheEntries: config.registries.token_cache_entries, tokenLifetimeSeconds: config.registries.token_cache_max_seconds,
        },
        log: log.child({ module: 'images' }),
        usedBy: (imageId) => imageUsedBy(tables, imageId),
      })),
      t.step('cni', async () => {
        if (store.getMeta('first_started_at') === undefined) {
          const written = config.cni.write_default_network ? await ensureDefaultNetwork(config.cni.conf_dir, config.pod_subnet) : null;
          if (written) {
            log.info({ file: written, subnet: config.pod_subnet }, 'no CNI network configured: wrote the default bridge network');
          }
          store.setMeta('first_started_at', new Date().toISOString());
        }
        cni = await CniManager.create({
          confDir: config.cni.conf_dir, binDirs: config.cni.bin_dirs, cacheDir: config.cni.cache_dir,
          defaultNetwork: config.cni.default_network || undefined, pluginTimeoutMs: config.cni.plugin_timeout_seconds * 1000,
          networksDir: config.cni.networks_dir, podResources: new PodResourcesClient(config.cni.pod_resources_socket),
          cdi, deviceStatusDir: join(config.state_dir, 'sandboxes'),
          log: log.child({ module: 'cni' }),
        });
        const cidr = podCidr(store);
        if (cidr) cni.setPodCidr(cidr);
      }),
      // What each handler supports is probed once here; Status and CreateContainer read the answer.
      t.step('node facts', () => {
        const apparmorReady = setUpApparmor({
          profile: config.apparmor_profile, stateDir: config.state_dir, log: log.child({ module: 'apparmor' }),
        });
        return Promise.all([
          apparmorReady,
          apparmorReady.then((a) => gatherNodeFacts(log, a)),
          probeKernelFeatures(config.root_dir, stagingDir, log).then((kernel) =>
            probeHandlerFeatures(new Map([...runtimes].map(([h, r]) => [h, { runtimePath: r.commandLine().path }])), kernel, log)),
        ]);
      }),
    ]);
    const network = cni!;
    const cgroupNamespace = unifiedCgroups();
    let pods: PodContext | undefined;
    streaming = await StreamingServer.start({
      address: config.streaming.address, port: config.streaming.port,
      idleTimeoutMs: config.streaming.idle_timeout_seconds * 1000, limits: streamingLimits(config.streaming),
      backend: streamingBackend(() => pods!),
      log: log.child({ module: 'streaming' }),
    });
    pods = {
      settings: config, tables, locks, background, log, network, runtimes, images, host: hostMechanics,
      events: podEvents(tables, config.container_events_buffer),
      pauseImage: await pauseImageSource(config, images, version),
      hostFacts: async (rootfs, image) => ({ ...await node.forRootfs(rootfs, image), cgroupNamespace }),
      cdi,
      runtimeFeatures,
    };
    // Before recovery, so no exit between its reads and serving goes unrecorded.
    recordExitsAsTheyHappen(pods);
    t.mark('streaming, pause image');
    const recovered = await recover(pods, log.child({ module: 'recovery' }));
    t.mark('recovery');
    if (config.metrics_address) {
      metrics = await startMetrics(config.metrics_address, tables, log.child({ module: 'metrics' }), images.stats);
    }
    const retrier = new Retrier(pods, log.child({ module: 'retry' }));
    retrier.start();
    const networkChecks = new NetworkChecks(pods);
    networkChecks.start();
    const edge: Edge = { config, version, pods, networkChecks, images, meta: store, streaming, lists, apparmor };
    // The sweep holds host objects against the records, so it waits for the leftovers' records to settle.
    const swept = recovered.finished.then(() => sweepOrphans(pods, log.child({ module: 'recovery' })));
    const warmUp = config.warm_up_pulls ? warmUpPullsWhenQuiet({
      ready: swept, busy: () => locks.busy || images.stats.inFlight > 0, warmUp: (signal) => images.warmUp(signal),
      log: log.child({ module: 'images' }),
    }) : undefined;
    const events = pods.events;
    const streams = streaming;
    return {
      runtime: runtimeService(edge),
      image: imageService(edge),
      metrics,
      closeStreams: async () => {
        // No warm-up starts, nor goes on, while the calls drain.
        await warmUp?.stop();
        events.close();
        await streams.stop();
      },
      stop: async () => {
        await swept;
        await retrier.stop();
        await background.drain();
        await networkChecks.stop();
        await metrics?.stop();
        for (const runtime of runtimes.values()) runtime.close();
        cni?.close();
      },
    };
  } catch (err) {
    await metrics?.stop();
    await streaming?.stop();
    cni?.close();
    throw err;
  }
}
