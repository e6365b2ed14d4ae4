// A failed pod network teardown shows on the metrics endpoint while it is retried, and goes once the
// retry succeeds; RPC outcomes are counted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { podDaemon } from '../../support/pod-daemon.js';
import { podConfig } from '../../support/pods.js';
import { freePort } from '../../support/registry.js';

const port = await freePort();

describe('metrics endpoint', () => {
  const pod = podDaemon(83, 'the metrics test', {
    network: (net) => net.writeBridgeConf({ extra: [{ type: 'mcnt-flaky', stateDir: net.recordDir, delFailures: 2 }] }),
    extraToml: `metrics_address = "127.0.0.1:${port}"`,
  });

  /** One sample of the scrape, by its full name with labels. */
  async function sample(series: string): Promise<number | undefined> {
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    const line = (await res.text()).split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? undefined : Number(line.slice(series.length + 1));
  }

  it('shows the pending CNI teardown as 1 while it is retried, then 0', async () => {
    assert.equal(await sample('minicri_pending_cni_teardowns'), 0);
    await assert.rejects(pod.daemon.client.runtime.call('RunPodSandbox', { config: podConfig('metrics-flaky') }), /mcnt-flaky refuses ADD/);
    assert.equal(await sample('minicri_pending_cni_teardowns'), 1);
    assert.equal(await sample('minicri_rpc_calls_total{rpc="RunPodSandbox",code="INTERNAL"}'), 1);
    assert.equal(await sample('minicri_sandboxes{state="SANDBOX_READY"}'), 0);
    const deadline = Date.now() + 15_000;
    while ((await sample('minicri_pending_cni_teardowns')) !== 0) {
      assert.ok(Date.now() < deadline, 'the deferred teardown did not complete within 15 s');
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(await sample('minicri_pending_removals{kind="sandbox"}'), 0);
    assert.ok((await sample('minicri_rpc_calls_total{rpc="Version",code="OK"}'))! >= 1, 'the start probe is counted');
  });
});
