// The VM test's disk: a stock Debian 12 made with debootstrap from Debian's own packages (its kernel, systemd,
// AppArmor, an ssh server), as an ext4 image built without loop mounts (`mkfs.ext4 -d`), with the kernel and
// initrd taken out of it to boot with qemu's -kernel. Built once and cached, keyed by a hash of everything that
// goes into it; each run boots a throw-away overlay on top, so the cached image stays as built.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { CACHE, hostDebianMirror } from '../node/node.js';

export const VM_CACHE = join(CACHE, 'vm');

/**
 * Debian's kernel and init, AppArmor's userspace (Debian 12 enables it by default), an ssh server to drive the
 * guest, and what the guest checks use beside minicri: a registry and busybox for a test image.
 */
const PACKAGES = [
  'linux-image-amd64', 'initramfs-tools', 'systemd-sysv', 'udev', 'kmod', 'apparmor', 'openssh-server', 'ca-certificates',
  'iproute2', 'docker-registry', 'busybox',
];
const DISK_SIZE = '12G';

// qemu's user-mode network gives the guest 10.0.2.15, the host's side 10.0.2.2 and a DNS forwarder at 10.0.2.3.
const FILES: Record<string, string> = {
  '/etc/hostname': 'minicri-vm\n',
  '/etc/hosts': '127.0.0.1 localhost\n127.0.1.1 minicri-vm\n',
  '/etc/fstab': '/dev/vda / ext4 errors=remount-ro 0 1\n',
  '/etc/resolv.conf': 'nameserver 10.0.2.3\n',
  '/etc/systemd/network/10-slirp.network': '[Match]\nName=en* eth*\n\n[Network]\nAddress=10.0.2.15/24\nGateway=10.0.2.2\nDNS=10.0.2.3\n',
  // The guest needs no wait for "online": ssh answers as soon as the address is up.
  '/etc/systemd/system/systemd-networkd-wait-online.service': '',
  '/etc/ssh/sshd_config.d/minicri-vm.conf': 'PermitRootLogin prohibit-password\nUseDNS no\n',
  // The disk is a throw-away overlay: dpkg's fsyncs only slow setup.sh's installs in an emulated guest (as in
  // Debian's container images).
  '/etc/dpkg/dpkg.cfg.d/minicri-vm-unsafe-io': 'force-unsafe-io\n',
};

export interface BaseImage {
  dir: string;
  /** The raw ext4 image of the root filesystem (never written to: runs use an overlay). */
  disk: string;
  kernel: string;
  initrd: string;
  /** The private key authorized for root in the image. */
  key: string;
}

const LOCAL_CAS = '/usr/local/share/ca-certificates';

/** What decides the image's contents; its hash names the cache entry. */
async function recipe(): Promise<string> {
  // The site's CAs are part of it: a new one must reach the guest.
  const cas = existsSync(LOCAL_CAS) ? await Promise.all((await readdir(LOCAL_CAS)).sort().map(async (f) => `${f}:${await readFile(join(LOCAL_CAS, f), 'utf8').catch(() => '')}`)) : [];
  return JSON.stringify({ v: 1, suite: 'bookworm', variant: 'minbase', PACKAGES, DISK_SIZE, FILES, cas });
}

/** The cached base image, built first when the recipe changed. */
export async function cachedBaseImage(log: (line: string) => void): Promise<BaseImage> {
  const key = createHash('sha256').update(await recipe()).digest('hex').slice(0, 16);
  const dir = join(VM_CACHE, `debian12-${key}`);
  const image: BaseImage = { dir, disk: join(dir, 'base.raw'), kernel: join(dir, 'vmlinuz'), initrd: join(dir, 'initrd.img'), key: join(dir, 'id_ed25519') };
  if (existsSync(join(dir, '.complete'))) return image;
  await mkdir(VM_CACHE, { recursive: true });
  const building = `${dir}.building-${process.pid}`;
  await rm(building, { recursive: true, force: true });
  try {
    await build(building, log);
    await rm(dir, { recursive: true, force: true });
    await rename(building, dir);
  } finally {
    await rm(building, { recursive: true, force: true });
  }
  // Images of older recipes are never booted again; a build whose test was killed is never finished.
  const stale = (n: string) => (/^debian12-[0-9a-f]{16}$/.test(n) && join(VM_CACHE, n) !== dir)
    || !existsSync(`/proc/${/^debian12-[0-9a-f]{16}\.building-(\d+)$/.exec(n)?.[1] ?? process.pid}`);
  for (const old of (await readdir(VM_CACHE)).filter(stale)) await rm(join(VM_CACHE, old), { recursive: true, force: true });
  return image;
}

async function build(out: string, log: (line: string) => void): Promise<void> {
  const root = join(out, 'rootfs');
  const mirror = await hostDebianMirror();
  await mkdir(out, { recursive: true });
  log(`debootstrap: Debian 12 (minbase, ${PACKAGES.join(', ')}) from ${mirror}`);
  // Its own .deb cache: a new recipe downloads only what changed.
  await mkdir(join(VM_CACHE, 'debootstrap'), { recursive: true });
  await execa('debootstrap', ['--variant=minbase', `--cache-dir=${join(VM_CACHE, 'debootstrap')}`, `--include=${PACKAGES.join(',')}`, 'bookworm', root, mirror],
    { timeout: 1_800_000, all: true })
    .catch((err) => { throw new Error(`debootstrap failed: ${String(err.all ?? err.message).slice(-3000)}`); });
  for (const [path, text] of Object.entries(FILES)) {
    await mkdir(join(root, path, '..'), { recursive: true });
    await writeFile(join(root, path), text);
  }
  await writeFile(join(root, 'etc/machine-id'), `${createHash('md5').update(out).digest('hex')}\n`);
  // The site's trust, as the host's admin set it up (the registries' certificates chain to a local CA here).
  if (existsSync(LOCAL_CAS)) await execa('cp', ['-a', `${LOCAL_CAS}/.`, join(root, LOCAL_CAS)]);
  const chroot = (...cmd: string[]) => execa('chroot', [root, ...cmd], { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' } });
  await chroot('update-ca-certificates');
  await chroot('systemctl', 'enable', 'systemd-networkd', 'ssh');
  // Root logs in by this key only (no password); the key lives beside the image.
  await execa('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'minicri-vm-test', '-f', join(out, 'id_ed25519')]);
  await mkdir(join(root, 'root/.ssh'), { recursive: true, mode: 0o700 });
  await writeFile(join(root, 'root/.ssh/authorized_keys'), await readFile(join(out, 'id_ed25519.pub')));
  await chmod(join(root, 'root/.ssh/authorized_keys'), 0o600);
  await execa('sh', ['-c', `rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*`, 'sh', root]);
  const boot = await readdir(join(root, 'boot'));
  const kernel = boot.find((f) => f.startsWith('vmlinuz-'));
  const initrd = boot.find((f) => f.startsWith('initrd.img-'));
  if (!kernel || !initrd) throw new Error(`no kernel or initrd in the image's /boot: ${boot.join(' ')}`);
  await execa('cp', [join(root, 'boot', kernel), join(out, 'vmlinuz')]);
  await execa('cp', [join(root, 'boot', initrd), join(out, 'initrd.img')]);
  log(`mkfs.ext4: the root filesystem as a ${DISK_SIZE} image (kernel ${kernel.slice('vmlinuz-'.length)})`);
  await execa('mkfs.ext4', ['-q', '-L', 'minicri-vm', '-d', root, join(out, 'base.raw'), DISK_SIZE], { all: true })
    .catch((err) => { throw new Error(`mkfs.ext4 failed: ${String(err.all ?? err.message).slice(-3000)}`); });
  await rm(root, { recursive: true, force: true });
  await writeFile(join(out, '.complete'), '');
}
