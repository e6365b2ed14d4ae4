// Fixtures for one describe block: a private CNI network (testNetwork), or a test daemon on one
// (podDaemon). Made before the block's tests; after them, the host checked to be as it was (but for
// the network's own bridge and shared chains), then everything removed, so a leak fails the block and
// is still cleaned up.
import { after, before } from 'node:test';
import { makeTestNet, type TestNet } from './cni-env.js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from './daemon.js';
import { checkThenClean, hostSnapshot, networkFixtureObjects, type HostSnapshot } from './leaks.js';

export interface TestNetworkOptions {
  /** Writes the network config (default: the plain test bridge). */
  network?: (net: TestNet) => Promise<unknown>;
  /** Runs after the host is checked, with the network's removal: what the tests themselves made (temp dirs). */
  cleanup?: () => unknown;
  /** Links `network` makes beside the bridge ("<kind> <name>", a macvlan's master), which `cleanup` removes. */
  links?: string[];
}

/**
 * Registers the hooks; the returned object is filled in before the first test runs. `after` hooks the
 * block registered earlier run before the network goes (node:test runs them in order).
 */
export function testNetwork(n: number, what: string, options: TestNetworkOptions = {}): { net: TestNet } {
  const fixture = {} as { net: TestNet };
  let snapshot: HostSnapshot;
  before(async () => {
    snapshot = await hostSnapshot();
    fixture.net = await makeTestNet(n);
    await (options.network ?? ((net) => net.writeBridgeConf()))(fixture.net);
  });
  after(async () => {
    const allowed = fixture.net ? networkFixtureObjects(fixture.net.bridge) : {};
    await checkThenClean(snapshot, what, { ...allowed, links: [...(allowed.links ?? []), ...(options.links ?? [])] }, async () => {
      await fixture.net?.cleanup();
      await options.cleanup?.();
    });
  });
  return fixture;
}

export interface PodDaemon {
  net: TestNet;
  dirs: DaemonDirs;
  /** Reassign after a restart; the one set last is stopped at the end. */
  daemon: TestDaemon;
}

export interface PodDaemonOptions {
  /** Writes the network config (default: the plain test bridge). */
  network?: (net: TestNet) => Promise<unknown>;
  extraToml?: string;
}

/** Registers the hooks; the returned object is filled in before the first test runs. */
export function podDaemon(n: number, what: string, options: PodDaemonOptions = {}): PodDaemon {
  const fixture = {} as PodDaemon;
  // Registered before the network's: the daemon stops before its network goes.
  after(async () => { await fixture.daemon?.stop(); });
  const network = testNetwork(n, what, { network: options.network, cleanup: () => { if (fixture.dirs) removeDirs(fixture.dirs); } });
  before(async () => {
    fixture.net = network.net;
    fixture.dirs = makeDaemonDirs(options.extraToml ?? '', fixture.net);
    fixture.daemon = await TestDaemon.start(fixture.dirs);
  });
  return fixture;
}

/**
 * A host check around the calling block (the whole file when called at its top level): a snapshot
 * before its first test, and after its last one the host must hold nothing more.
 */
export function hostCheck(what: string): void {
  let snapshot: HostSnapshot | undefined;
  before(async () => { snapshot = await hostSnapshot(); });
  after(() => checkThenClean(snapshot, what, {}, () => {}));
}
