// The unit file a packager would ship: systemd itself finds nothing wrong with it, and it keeps
// containers alive across daemon restarts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';

const UNIT = fileURLToPath(new URL('../../../../systemd/minicri.service', import.meta.url));

describe('systemd unit', () => {
  it('passes systemd-analyze verify without a warning', async () => {
    const result = await execa('systemd-analyze', ['verify', UNIT], { reject: false });
    assert.equal(result.exitCode, 0, result.stderr);
    assert.equal(result.stderr.trim(), '');
  });

  it('leaves containers running when the daemon stops, delegates cgroups, raises the fd limit and keeps the runtime from the OOM killer', () => {
    const unit = readFileSync(UNIT, 'utf8');
    assert.match(unit, /^KillMode=process$/m);
    assert.match(unit, /^Delegate=yes$/m);
    assert.match(unit, /^LimitNOFILE=1048576$/m);
    assert.match(unit, /^Restart=on-failure$/m);
    // Restarts (a test's, an operator's, a crash loop's) never exhaust a start limit: the node keeps its runtime.
    assert.match(unit, /^\[Unit\][^[]*^StartLimitIntervalSec=0$/m);
    assert.match(unit, /^OOMScoreAdjust=-999$/m);
    assert.match(unit, /^ExecStart=\/usr\/local\/bin\/minicri serve$/m);
  });
});
