// The unit file a packager would ship: systemd itself finds nothing wrong with it, and under a real
// systemd (this host's own, booted in a throwaway nspawn container) it does what it says: a stop
// leaves the daemon's children (the conmons that hold containers) running, its fd limit is raised,
// and a crash restarts it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { MAIN } from '../../support/daemon.js';
import { hostCheck } from '../../support/pod-daemon.js';

const UNIT = fileURLToPath(new URL('../../../../systemd/minicri.service', import.meta.url));

/** Stands in for the daemon: a child that outlives it, as conmon does for each container, then the daemon itself. */
const STAND_IN = `#!/bin/sh
sleep 1000 &
echo $! > /run/minicri-child.pid
exec sleep 1000
`;

hostCheck('the systemd unit tests');

describe('systemd unit', () => {
  it('passes systemd-analyze verify without a warning', async () => {
    // The command is this checkout's build: /usr/local/bin/minicri is what setup.sh installs on the host,
    // and verify would judge that install (it checks ExecStart's program exists), not the unit.
    const dir = await mkdtemp(join(tmpdir(), 'minicri-unit-verify-'));
    try {
      const unit = join(dir, 'minicri.service');
      await writeFile(unit, (await readFile(UNIT, 'utf8')).replace(/^ExecStart=\/usr\/local\/bin\/minicri /m, `ExecStart=${MAIN} `));
      const result = await execa('systemd-analyze', ['verify', unit], { reject: false });
      assert.equal(result.exitCode, 0, result.stderr);
      assert.equal(result.stderr.trim(), '');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  // The timeout only keeps a container that never boots from hanging the run.
  it('under systemd: a stop leaves the daemon\'s children running, its fd limit is raised, a crash restarts it', { timeout: 180_000 }, async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'minicri-unit-'));
    // The shipped unit as it is; a drop-in replaces only ExecStart by the stand-in.
    await copyFile(UNIT, join(dir, 'minicri.service'));
    await mkdir(join(dir, 'minicri.service.d'));
    await writeFile(join(dir, 'minicri.service.d', 'stand-in.conf'), '[Service]\nExecStart=\nExecStart=/bin/sh /opt/minicri-unit/stand-in.sh\n');
    await writeFile(join(dir, 'stand-in.sh'), STAND_IN);
    // The control: the shipped unit with systemd's default KillMode, whose stop must take the child too.
    const shipped = await readFile(UNIT, 'utf8');
    assert.match(shipped, /^KillMode=process$/m);
    await writeFile(join(dir, 'control.service'), shipped.replace(/^KillMode=process$/m, 'KillMode=control-group')
      .replace(/^ExecStart=.*$/m, 'ExecStart=/bin/sh /opt/minicri-unit/stand-in.sh'));
    // The host's /usr booted on an empty tmpfs root, in its own network namespace (lo only), not registered anywhere.
    const nspawn = spawn('systemd-nspawn', ['--quiet', '--register=no', '--keep-unit', '--volatile=yes', '--private-network', '-D', '/',
      '-M', `minicri-unit-${process.pid}`, `--bind-ro=${dir}:/opt/minicri-unit`,
      `--bind-ro=${dir}/minicri.service:/etc/systemd/system/minicri.service`, `--bind-ro=${dir}/minicri.service.d:/etc/systemd/system/minicri.service.d`,
      `--bind-ro=${dir}/control.service:/etc/systemd/system/minicri-control.service`,
      '-b', 'systemd.firstboot=off'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    for (const s of [nspawn.stdout, nspawn.stderr]) s.on('data', (c: Buffer) => { output = (output + c.toString()).slice(-20_000); });
    const exited = new Promise<void>((resolve) => nspawn.once('exit', () => resolve()));
    let leader = 0;
    const inside = async (...cmd: string[]) => (await execa('nsenter', ['-t', String(leader), '-a', ...cmd])).stdout.trim();
    const alive = async (pid: string) => (await execa('nsenter', ['-t', String(leader), '-a', 'kill', '-0', pid], { reject: false })).exitCode === 0;
    const mainPid = () => inside('systemctl', 'show', '-p', 'MainPID', '--value', 'minicri.service');
    try {
      // The container's PID 1 is nspawn's child named systemd (an intermediate child comes and goes first); its
      // manager answers once booted far enough.
      for (let i = 0; ; i++) {
        assert.ok(i < 300 && nspawn.exitCode === null, `the container did not boot:\n${output}`);
        leader = Number((await execa('pgrep', ['-P', String(nspawn.pid), '-x', 'systemd'], { reject: false })).stdout.split('\n')[0] || 0);
        if (leader && (await execa('nsenter', ['-t', String(leader), '-a', 'systemctl', 'show', '-p', 'Version'], { reject: false })).exitCode === 0) break;
        await sleep(200);
      }
      // The unit waits for network-online.target, which a container with only lo never reaches by itself.
      await inside('systemctl', 'mask', '--runtime', 'systemd-networkd-wait-online.service');
      await inside('systemctl', 'start', 'minicri.service');
      const first = await mainPid();
      assert.notEqual(first, '0', 'the daemon runs');

      // LimitNOFILE=1048576, as far as the host lets systemd raise it (a host without CAP_SYS_RESOURCE caps it at
      // its own hard limit); without the setting the soft limit would be systemd's default 1024.
      const openFiles = (limits: string) => /^Max open files\s+(\d+)\s+(\d+)/m.exec(limits)!.slice(1).map(Number);
      const ceiling = Math.min(1048576, openFiles(await inside('cat', '/proc/1/limits'))[1]!);
      assert.ok(ceiling > 1024, `the host allows no more than ${ceiling} open files`);
      assert.deepEqual(openFiles(await inside('cat', `/proc/${first}/limits`)), [ceiling, ceiling]);
      // (Delegate=yes shows nowhere here: nspawn hands the container's systemd the v1 controller hierarchies read-only,
      // so it makes no service cgroup in them either way. `systemd-analyze verify` above at least parses it.)

      // KillMode=process: stopping the unit stops the daemon, never what it started.
      const child = await inside('cat', '/run/minicri-child.pid');
      assert.equal(await alive(child), true);
      await inside('systemctl', 'stop', 'minicri.service');
      assert.equal(await alive(first), false, 'the daemon stopped');
      const survived = await alive(child);
      // Only a host where the default KillMode takes the children shows the difference: here the control's.
      await inside('systemctl', 'start', 'minicri-control.service');
      const controlChild = await inside('cat', '/run/minicri-child.pid');
      await inside('systemctl', 'stop', 'minicri-control.service');
      if (await alive(controlChild)) {
        t.diagnostic('KillMode not checked: systemd in this host\'s nspawn container leaves a stopped unit\'s children even with KillMode=control-group');
        await inside('kill', controlChild);
      } else {
        assert.equal(survived, true, 'the daemon\'s child (a conmon) still runs after the stop');
      }

      // Restarts (an operator's, a crash loop's) never exhaust a start limit, and the runtime is the OOM killer's
      // last choice: as systemd read the unit.
      const shown = async (property: string) => inside('systemctl', 'show', '-p', property, '--value', 'minicri.service');
      assert.equal(await shown('StartLimitIntervalUSec'), '0');
      assert.equal(await shown('OOMScoreAdjust'), '-999');

      // Restart=on-failure: killed, it comes back (after RestartSec).
      await inside('systemctl', 'start', 'minicri.service');
      const second = await mainPid();
      await inside('kill', '-9', second);
      for (let i = 0; ; i++) {
        const now = await mainPid();
        if (now !== '0' && now !== second) break;
        assert.ok(i < 300, `systemd did not restart the killed daemon (MainPID ${now})`);
        await sleep(100);
      }
    } finally {
      // Power off: SIGRTMIN+4 to the container's systemd; everything in it goes with it.
      if (leader) await execa('kill', ['-s', 'SIGRTMIN+4', String(leader)], { reject: false });
      else nspawn.kill('SIGKILL');
      const off = await Promise.race([exited.then(() => true), sleep(60_000, undefined, { ref: false }).then(() => false)]);
      if (!off) {
        // Killing its PID 1 ends the whole container; then nspawn itself.
        if (leader) await execa('kill', ['-9', String(leader)], { reject: false });
        nspawn.kill('SIGKILL');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    }
  });
});
