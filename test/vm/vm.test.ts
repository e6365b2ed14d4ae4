// A real Debian 12 node in a VM: Debian's own kernel 6.1 with AppArmor enabled and cgroup v2 only, as Debian
// installs them, booted with qemu (KVM when it works, TCG otherwise) from an image debootstrap made of Debian's
// packages (image.ts). Into it go a checkout of minicri (the tracked and untracked, not ignored files), the
// node_modules the host's `setup.sh` built for the pinned Node on the same Debian glibc (so the guest's setup.sh
// finds the same lock sum and skips npm ci), and apt's and npm's download caches; then, as root, exactly the
// README's `./scripts/setup.sh start`, and the checks of test/vm/guest/ with the project's own CRI client on the
// pinned Node. The guest reaches the package registries through qemu's user-mode network as the host does; its
// pods use a bridge with no route out. Each phase prints its time; new downloads go back into the caches; qemu and
// the overlay go at the end, pass or fail (MINICRI_VM_KEEP=1 leaves the guest running to look into it).
// Run by `npm run test:vm` (as root, after `setup.sh test` built node_modules).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, realpath } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { cachedBaseImage, VM_CACHE } from './image.js';
import { Vm } from './qemu.js';

const CHECKOUT = resolve(fileURLToPath(import.meta.url), '../../../..');
const KEEP = process.env.MINICRI_VM_KEEP === '1';
const GUEST_CHECKOUT = '/root/minicri';
const GUEST_NODE = '/usr/local/lib/minicri/node/bin/node';
/** Set in the guest once the caches are in: what is newer than it was downloaded there. */
const COPIED_MARK = '/root/.minicri-vm-caches-in';
/** The guest's download caches and where the host keeps them between runs. */
const CACHES = [
  { guest: '/var/cache/apt/archives', host: join(VM_CACHE, 'apt/archives'), find: 'find . -maxdepth 1 -name "*.deb"' },
  { guest: '/var/lib/apt/lists', host: join(VM_CACHE, 'apt/lists'), find: 'find . -maxdepth 1 -type f ! -name lock' },
  { guest: '/root/.npm/_cacache', host: join(VM_CACHE, 'npm/_cacache'), find: 'find . -type f' },
];
/** The checks in the guest, one node:test file each (test/vm/guest/<name>.check.ts: not *.test.ts, which the host's test:vm would run), in this order. */
const GUEST_CHECKS = ['cgroup2', 'apparmor', 'userns', 'checkpoint', 'restart'];

// minicri's own config for the guest: no default network of its own (minicri0 would route pods out through
// slirp); the pods use a bridge and subnet of the test's, no gateway and no masquerading, so no route out.
const CONFIG = 'log_level = "info"\n[cni]\nwrite_default_network = false\n';
const CONFLIST = JSON.stringify({
  cniVersion: '1.0.0', name: 'vm-test',
  plugins: [{ type: 'bridge', bridge: 'mcri-vm0', isGateway: false, ipMasq: false, ipam: { type: 'host-local', ranges: [[{ subnet: '10.238.0.0/24' }]] } }],
}, null, 2);

const log = (line: string) => console.log(`# ${line}`);

async function phase<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const start = Date.now();
  try {
    return await fn();
  } finally {
    log(`phase ${name}: ${((Date.now() - start) / 1000).toFixed(1)} s`);
  }
}

describe('a real Debian 12 node in a VM: the README\'s setup.sh start, then AppArmor, user namespaces, cgroup v2, CRIU', { timeout: 90 * 60_000 }, () => {
  let vm: Vm | undefined;
  let cachesIn = false;
  let installed = false;
  const ssh = () => vm!.ssh;

  before(async () => {
    const image = await phase('image', () => cachedBaseImage(log));
    vm = await phase('boot', () => Vm.boot({ image, log }));
    log(`the VM runs with ${vm.accel.toUpperCase()}; its console log: ${vm.consoleLog}`);
  });

  after(async () => {
    if (!vm) return;
    if (KEEP) {
      log(`MINICRI_VM_KEEP=1: the VM stays up; reach it with: ${vm.keep()}`);
      return;
    }
    try {
      if (cachesIn) await phase('caches out', () => copyCachesOut(vm!)).catch((err: Error) => log(`the caches were not copied back: ${err.message}`));
    } finally {
      await phase('shutdown', () => vm!.shutdown());
    }
    assert.equal(existsSync(vm.dir), false, `the VM's work dir ${vm.dir} is left`);
    const left = (await readdir('/var/tmp')).filter((n) => n.startsWith(`minicri-vm-${process.pid}-`));
    assert.deepEqual(left, [], 'no work dir of this test is left in /var/tmp');
  });

  it('boots Debian 12\'s own kernel with AppArmor enabled and cgroup v2 as the only hierarchy', async () => {
    // Debian's defaults, not forced on the kernel's command line: what a node installed from Debian has.
    const cmdline = await ssh().check('cat /proc/cmdline');
    assert.doesNotMatch(cmdline, /apparmor=|security=|systemd\.unified_cgroup_hierarchy|cgroup_no_v1/);
    assert.match(await ssh().check('cat /etc/debian_version'), /^12\./);
    const kernel = (await ssh().check('uname -r')).trim();
    assert.match(kernel, /^6\.1\.\d+-\d+-amd64$/, 'Debian 12\'s kernel');
    assert.equal((await ssh().check('cat /sys/module/apparmor/parameters/enabled')).trim(), 'Y', 'AppArmor is enabled');
    assert.match(await ssh().check('cat /sys/kernel/security/lsm'), /(^|,)apparmor(,|$)/);
    assert.equal((await ssh().check('stat -f -c %T /sys/fs/cgroup')).trim(), 'cgroup2fs', 'cgroup v2 at /sys/fs/cgroup');
    assert.equal((await ssh().check('awk \'$3 == "cgroup" { print $2 }\' /proc/mounts')).trim(), '', 'no cgroup v1 hierarchy is mounted');
    log(`guest kernel ${kernel}, AppArmor enabled, cgroup v2 only (${(await ssh().check('cat /sys/fs/cgroup/cgroup.controllers')).trim()})`);
  });

  it('takes a checkout of minicri, its node_modules and the download caches', { timeout: 20 * 60_000 }, async () => {
    await phase('copy in', async () => {
      // The checkout as a person would have it: what `git ls-files` names (with work not yet committed), no build.
      const listed = (await execa('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: CHECKOUT })).stdout;
      // node_modules comes next, from the host's build; a worktree's may be a symlink that git does not ignore.
      const files = listed.split('\0').filter((f) => f !== '' && !/^(node_modules|dist)(\/|$)/.test(f) && existsSync(join(CHECKOUT, f)));
      await ssh().tarInto(GUEST_CHECKOUT, ['--null', '-T', '-'], CHECKOUT, files.join('\0'));
      // The host's node_modules, built by its setup.sh for the pinned Node: reused, so the guest compiles nothing.
      const modules = join(CHECKOUT, 'node_modules');
      const lock = await readFile(join(modules, '.minicri-lock'), 'utf8').catch(() => '');
      if (lock) {
        await ssh().tarInto(join(GUEST_CHECKOUT, 'node_modules'), ['.'], await realpath(modules));
      } else {
        log('the host\'s node_modules has no .minicri-lock (run setup.sh first): the guest\'s setup.sh runs npm ci, and compiles better-sqlite3');
      }
      for (const c of CACHES) {
        await mkdir(c.host, { recursive: true });
        await ssh().tarInto(c.guest, ['.'], c.host);
      }
      await ssh().check(`touch ${COPIED_MARK}`);
      cachesIn = true;
      await ssh().check('mkdir -p /etc/minicri /etc/cni/net.d && cat > /etc/minicri/minicri.toml', { input: CONFIG });
      await ssh().check('cat > /etc/cni/net.d/10-vm-test.conflist', { input: CONFLIST });
    });
    assert.equal((await ssh().check(`test -x ${GUEST_CHECKOUT}/scripts/setup.sh && echo ok`)).trim(), 'ok');
  });

  it('installs and starts minicri with the README\'s ./scripts/setup.sh start, under systemd', { timeout: 45 * 60_000 }, async () => {
    assert.ok(cachesIn, 'the checkout is in the VM');
    const lockBefore = (await ssh().run(`cat ${GUEST_CHECKOUT}/node_modules/.minicri-lock`)).stdout;
    const run = await phase('setup.sh start', () => ssh().run(`cd ${GUEST_CHECKOUT} && ./scripts/setup.sh start`, {
      timeout: 45 * 60_000, onLine: (line) => log(`setup.sh | ${line}`),
    }));
    assert.equal(run.exitCode, 0, `./scripts/setup.sh start failed (${run.exitCode}):\n${run.stdout.slice(-4000)}\n${run.stderr.slice(-4000)}`);
    const lockAfter = (await ssh().run(`cat ${GUEST_CHECKOUT}/node_modules/.minicri-lock`)).stdout;
    log(lockBefore && lockAfter === lockBefore ? 'setup.sh reused the host\'s node_modules (no npm ci)' : `setup.sh ran npm ci in the guest (lock "${lockBefore.trim()}" -> "${lockAfter.trim()}")`);
    log(`minicri's Node in the guest: ${(await ssh().check(`${GUEST_NODE} --version`)).trim()}; CRIU: ${(await ssh().run('criu --version')).stdout.replace(/\n/g, ' ').trim()}`);
    assert.equal((await ssh().run('systemctl is-active minicri')).stdout.trim(), 'active');
    assert.equal((await ssh().run('systemctl is-enabled minicri')).stdout.trim(), 'enabled');
    assert.equal((await ssh().check(`readlink /proc/$(systemctl show --value --property=MainPID minicri)/exe`)).trim(), GUEST_NODE,
      'the unit runs minicri on the Node setup.sh installed');
    installed = true;
  });

  for (const check of GUEST_CHECKS) {
    it(`passes the guest checks of ${check} (test/vm/guest/${check}.check.ts)`, { timeout: 20 * 60_000 }, async () => {
      assert.ok(installed, 'minicri was installed in the VM');
      const run = await phase(`checks ${check}`, () => ssh().run(
        `cd ${GUEST_CHECKOUT} && ${GUEST_NODE} --test --test-concurrency=1 --test-reporter=spec dist/test/vm/guest/${check}.check.js`,
        { timeout: 20 * 60_000, onLine: (line) => log(`${check} | ${line}`) },
      ));
      assert.equal(run.exitCode, 0, `the guest checks of ${check} failed (${run.exitCode}); their output is above:\n${run.stdout.slice(-3000)}\n${run.stderr.slice(-2000)}`);
    });
  }
});

/** What the guest downloaded (newer than the copy in) goes back into the host's caches for the next run. */
async function copyCachesOut(vm: Vm): Promise<void> {
  for (const c of CACHES) {
    const n = await vm.ssh.tarOut(c.guest, `test -d . && ${c.find} -newer ${COPIED_MARK} -printf '%P\\n'`, c.host);
    log(`${n} new files from the guest's ${c.guest} into ${c.host}`);
  }
}
