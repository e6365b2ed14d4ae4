// A test daemon on a private CNI network for one describe block: started before its tests; after
// them stopped, its network and directories removed, and the host checked to be as it was.
import { after, before } from 'node:test';
import { makeTestNet, type TestNet } from './cni-env.js';
import { makeDaemonDirs, removeDirs, TestDaemon, type DaemonDirs } from './daemon.js';
import { assertNothingLeft, hostSnapshot, type HostSnapshot } from './leaks.js';

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
  let snapshot: HostSnapshot;
  before(async () => {
    snapshot = await hostSnapshot();
    fixture.net = await makeTestNet(n);
    await (options.network ?? ((net) => net.writeBridgeConf()))(fixture.net);
    fixture.dirs = makeDaemonDirs(options.extraToml ?? '', fixture.net);
    fixture.daemon = await TestDaemon.start(fixture.dirs);
  });
  after(async () => {
    await fixture.daemon?.stop();
    await fixture.net?.cleanup();
    if (fixture.dirs) removeDirs(fixture.dirs);
    await assertNothingLeft(snapshot, what);
  });
  return fixture;
}
