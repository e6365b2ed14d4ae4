// After a pull of big layers the daemon gives back what the pull's pieces took from malloc (core/malloc-trim.ts):
// without it, glibc's arenas kept some 50 MiB of a 100 MB pull for as long as the daemon ran.
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { makeDaemonDirs, removeDirs, TestDaemon } from '../../support/daemon.js';
import { hostCheck } from '../../support/pod-daemon.js';
import { startRegistry } from '../../support/registry.js';
import { rssBytes } from '../../support/rss.js';
import { buildImage, pushImage } from '../../support/test-images.js';
import { waitFor } from '../../support/wait.js';

hostCheck('the memory-after-pull test');

const rssMiB = (pid: number) => rssBytes(pid) / (1 << 20);

test('the memory a pull of big layers took goes back to the system once the unpack workers are idle', { timeout: 120_000 }, async (t) => {
  const registry = await startRegistry();
  t.after(() => registry.stop());
  // Four layers of incompressible data, each big enough for an unpack worker.
  const layers = Array.from({ length: 4 }, (_, l) => ({ entries: Array.from({ length: 4 }, (_, f) => ({ name: `l${l}/f${f}`, data: randomBytes(5 << 20) })) }));
  await pushImage(registry, 'test/big', ['1'], await buildImage(layers, { Cmd: ['/bin/true'] }));
  const dirs = makeDaemonDirs();
  const daemon = await TestDaemon.start(dirs);
  t.after(async () => { await daemon.stop(); removeDirs(dirs); });
  const pid = daemon.process.pid!;

  // The highest RSS while pulling: read after the pull instead, it could already be after the trim on a slow run.
  let peak = 0;
  let pulling = true;
  const sampling = (async () => {
    while (pulling) {
      peak = Math.max(peak, rssMiB(pid));
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  await daemon.client.image.call('PullImage', { image: { image: `${registry.host}/test/big:1` } }).finally(() => { pulling = false; });
  await sampling;
  // The workers stay up, idle, for minutes; the memory goes back within seconds of their last layer.
  await waitFor(async () => rssMiB(pid) < peak - 20, 15_000, `the daemon's RSS to fall 20 MiB below its ${peak.toFixed(0)} MiB peak`);
});
