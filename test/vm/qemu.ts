// Boots the base image in qemu on a throw-away qcow2 overlay: Debian's kernel and initrd with -kernel, the
// serial console to a log file, user-mode networking with ssh forwarded from a free port on the host's loopback
// (the guest reaches what the host reaches, and nothing reaches the guest but that port). KVM when it works,
// TCG otherwise: a KVM guest that prints nothing on its console within a minute is taken for the known nested-KVM
// hang and replaced by a TCG one. Shutdown kills qemu if it does not power off, and removes the overlay.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, constants, existsSync, openSync } from 'node:fs';
import { access, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { freePort } from '../support/registry.js';
import type { BaseImage } from './image.js';
import { Ssh } from './ssh.js';

export type Accel = 'kvm' | 'tcg';

export interface VmOptions {
  image: BaseImage;
  log: (line: string) => void;
  memory?: string;
  cpus?: number;
}

const WORK_PREFIX = 'minicri-vm-';
const KVM_PROBE_MS = 60_000;
const SSH_MS = 600_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Vm {
  private constructor(
    readonly dir: string,
    readonly accel: Accel,
    readonly ssh: Ssh,
    readonly consoleLog: string,
    private readonly qemu: ChildProcess,
  ) {}

  /** Boots the image and waits for ssh; on any failure nothing of it is left. */
  static async boot(opts: VmOptions): Promise<Vm> {
    await removeStaleVms(opts.log);
    const dir = (await execa('mktemp', ['-d', `/var/tmp/${WORK_PREFIX}${process.pid}-XXXXXX`])).stdout;
    try {
      const overlay = join(dir, 'overlay.qcow2');
      await execa('qemu-img', ['create', '-q', '-f', 'qcow2', '-b', opts.image.disk, '-F', 'raw', overlay]);
      const accels: Accel[] = (await kvmUsable()) ? ['kvm', 'tcg'] : ['tcg'];
      for (const accel of accels) {
        const port = await freePort();
        const consoleLog = join(dir, `console-${accel}.log`);
        const qemu = startQemu(opts, accel, overlay, port, consoleLog, dir);
        const vm = new Vm(dir, accel, new Ssh(port, opts.image.key, join(dir, 'ssh.sock')), consoleLog, qemu);
        if (accel === 'kvm' && accels.length > 1 && !(await vm.consoleShows(/Linux version/, KVM_PROBE_MS))) {
          opts.log(vm.running ? `KVM: no console output within ${KVM_PROBE_MS / 1000} s (the nested-KVM hang): falling back to TCG`
            : `KVM: qemu exited before the kernel ran (${(await vm.qemuMessages()).trim().split('\n').pop()}): falling back to TCG`);
          await vm.kill();
          continue;
        }
        try {
          await vm.waitForSsh(SSH_MS);
        } catch (err) {
          await vm.kill();
          if (accel === 'kvm') throw err;
          const kvm = accels.length > 1 ? 'KVM hung (no console output within a minute)' : '/dev/kvm is missing or not usable';
          throw new Error(`neither KVM nor TCG can run the VM here: ${kvm}, and TCG failed: ${(err as Error).message}`);
        }
        return vm;
      }
      throw new Error('unreachable: TCG is always tried last');
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  private get running(): boolean {
    return this.qemu.exitCode === null && this.qemu.signalCode === null;
  }

  private async consoleText(): Promise<string> {
    return readFile(this.consoleLog, 'utf8').catch(() => '');
  }

  /** The console's last lines, for error messages. */
  async consoleTail(lines = 60): Promise<string> {
    return (await this.consoleText()).split('\n').slice(-lines).join('\n');
  }

  private async consoleShows(pattern: RegExp, ms: number): Promise<boolean> {
    for (const deadline = Date.now() + ms; Date.now() < deadline && this.running;) {
      if (pattern.test(await this.consoleText())) return true;
      await sleep(500);
    }
    return pattern.test(await this.consoleText());
  }

  private async waitForSsh(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    for (;;) {
      if (!this.running) throw new Error(`qemu (${this.accel}) exited (${this.qemu.exitCode ?? this.qemu.signalCode}) before ssh answered: ${await this.qemuMessages()}\n${await this.consoleTail()}`);
      const r = await this.ssh.run('true', { timeout: 20_000 });
      if (r.exitCode === 0) return;
      if (Date.now() > deadline) throw new Error(`the VM (${this.accel}) did not answer ssh within ${ms / 1000} s; its console:\n${await this.consoleTail()}`);
      await sleep(2000);
    }
  }

  /** What qemu itself printed (errors such as a missing accelerator). */
  async qemuMessages(): Promise<string> {
    return (await readFile(join(this.dir, `qemu-${this.accel}.log`), 'utf8').catch(() => '')).slice(-3000);
  }

  /** Leaves the guest running when the test ends (MINICRI_VM_KEEP): the test no longer waits for qemu. */
  keep(): string {
    this.qemu.unref();
    return `ssh ${this.ssh.args.join(' ')}  # qemu pid ${this.qemu.pid}, work dir ${this.dir}`;
  }

  private async kill(): Promise<void> {
    if (this.running) {
      const exited = once(this.qemu, 'exit');
      this.qemu.kill('SIGKILL');
      await exited;
    }
  }

  /** Powers the guest off (killing qemu if it has not stopped within a minute) and removes the overlay. */
  async shutdown(): Promise<void> {
    try {
      if (this.running) {
        const exited = once(this.qemu, 'exit');
        // The connection drops as the guest goes down: its exit status means nothing.
        await this.ssh.run('systemctl poweroff', { timeout: 20_000 });
        const timer = setTimeout(() => this.qemu.kill('SIGKILL'), 60_000);
        await exited;
        clearTimeout(timer);
      }
    } finally {
      await this.kill();
      await this.ssh.close();
      await rm(this.dir, { recursive: true, force: true });
    }
  }
}

/** /dev/kvm exists and opens read-write (it can still hang: the boot probes it). */
async function kvmUsable(): Promise<boolean> {
  return access('/dev/kvm', constants.R_OK | constants.W_OK).then(() => true, () => false);
}

function startQemu(opts: VmOptions, accel: Accel, overlay: string, port: number, consoleLog: string, dir: string): ChildProcess {
  const args = [
    '-accel', accel === 'kvm' ? 'kvm' : 'tcg,thread=multi', '-cpu', accel === 'kvm' ? 'host' : 'max',
    '-m', opts.memory ?? '6G', '-smp', String(opts.cpus ?? 2),
    '-nographic', '-monitor', 'none', '-serial', `file:${consoleLog}`, '-no-reboot', '-pidfile', join(dir, 'qemu.pid'),
    '-kernel', opts.image.kernel, '-initrd', opts.image.initrd, '-append', 'root=/dev/vda rw console=ttyS0',
    // The overlay is thrown away after the run: no need to flush it to the host's disk.
    '-drive', `file=${overlay},format=qcow2,if=virtio,cache=unsafe,discard=unmap`,
    '-netdev', `user,id=net0,hostfwd=tcp:127.0.0.1:${port}-:22`, '-device', 'virtio-net-pci,netdev=net0',
    '-device', 'virtio-rng-pci',
  ];
  // Its own messages to a file, not a pipe: a guest kept for debugging outlives the test process.
  const stderr = openSync(join(dir, `qemu-${accel}.log`), 'a');
  try {
    return spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'ignore', stderr] });
  } finally {
    closeSync(stderr);
  }
}

/**
 * What a VM test that was killed outright (no after hook) left: its qemu, its work dir. Each carries the test
 * process's PID in its name; only those whose test process is gone are removed.
 */
async function removeStaleVms(log: (line: string) => void): Promise<void> {
  for (const name of (await readdir('/var/tmp').catch(() => [])).filter((n) => n.startsWith(WORK_PREFIX))) {
    const owner = Number(new RegExp(`^${WORK_PREFIX}(\\d+)-`).exec(name)?.[1]);
    if (!(owner > 0) || existsSync(`/proc/${owner}`)) continue;
    const dir = join('/var/tmp', name);
    const pid = Number(await readFile(join(dir, 'qemu.pid'), 'utf8').catch(() => ''));
    if (pid > 0 && (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).includes(dir)) {
      log(`killing the qemu (pid ${pid}) a killed VM test left`);
      try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    }
    await rm(dir, { recursive: true, force: true });
  }
}
