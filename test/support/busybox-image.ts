// A runnable busybox image for container tests, built from the host's dynamically linked busybox: the
// binary, one symlink per applet where `busybox --list-full` puts it, the shared libraries `ldd` names,
// and /etc/passwd and /etc/group with users the identity tests look for. Pushed to a test registry.
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { execa } from 'execa';
import type { TestRegistry } from './registry.js';
import { buildImage, pushImage, type TarEntry, type TestLayer } from './test-images.js';

const BUSYBOX = '/bin/busybox';
const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Users and groups in the image: `app` (1000:1000) is also a member of `extra` (2000). */
export const APP_UID = 1000;
export const APP_GID = 1000;
export const EXTRA_GID = 2000;

const PASSWD = [
  'root:x:0:0:root:/root:/bin/sh',
  'nobody:x:65534:65534:nobody:/nonexistent:/bin/false',
  `app:x:${APP_UID}:${APP_GID}:app:/home/app:/bin/sh`,
  '',
].join('\n');
const GROUP = ['root:x:0:', 'nogroup:x:65534:', `app:x:${APP_GID}:`, `extra:x:${EXTRA_GID}:app`, ''].join('\n');

/** Parent directories of `path` (without a leading slash), outermost first. */
function parents(path: string): string[] {
  const out: string[] = [];
  for (let d = dirname(path); d !== '.' && d !== '/'; d = dirname(d)) out.unshift(d);
  return out;
}

/** The busybox root filesystem as one layer. */
export async function busyboxImageLayer(): Promise<TestLayer> {
  const [binary, list, ldd] = await Promise.all([
    readFile(BUSYBOX),
    execa(BUSYBOX, ['--list-full']),
    execa('ldd', [BUSYBOX], { reject: false }),
  ]);
  const applets = list.stdout.split('\n').map((s) => s.trim()).filter((s) => s !== '' && s !== 'bin/busybox');
  // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" and "/lib64/ld-linux-x86-64.so.2 (0x…)".
  const libs = ldd.exitCode === 0 ? [...ldd.stdout.matchAll(/(\/\S+) \(0x[0-9a-f]+\)/g)].map((m) => m[1]!.slice(1)) : [];
  const files: TarEntry[] = [
    { name: 'bin/busybox', data: binary, mode: 0o755 },
    // Applets live in bin, sbin, usr/bin and usr/sbin: each links to the binary by an absolute path.
    ...applets.map((a): TarEntry => ({ name: a, type: 'symlink', linkname: '/bin/busybox' })),
    ...await Promise.all(libs.map(async (l): Promise<TarEntry> => ({ name: l, data: await readFile(`/${l}`), mode: 0o755 }))),
    { name: 'etc/passwd', data: PASSWD },
    { name: 'etc/group', data: GROUP },
  ];
  const dirs = new Set(['proc', 'sys', 'dev', 'etc', 'root', 'run', 'var', 'home', ...files.flatMap((f) => parents(f.name))]);
  return {
    entries: [
      ...[...dirs].sort().map((d): TarEntry => ({ name: `${d}/`, type: 'directory' })),
      { name: 'tmp/', type: 'directory', mode: 0o1777 },
      { name: 'home/app/', type: 'directory', uid: APP_UID, gid: APP_GID },
      ...files,
    ],
  };
}

export interface BusyboxImages {
  /** Runs as root: `<host>/test/busybox:1`. */
  root: string;
  /** Image config User "app": `<host>/test/busybox:app`. */
  app: string;
  /** Image config StopSignal SIGUSR1: `<host>/test/busybox:usr1`. */
  usr1: string;
}

let layer: Promise<TestLayer> | undefined;

/**
 * Pushes the busybox image as `test/busybox:<tag>`, with `config` over the defaults and `extra` layers
 * on top; returns its reference.
 */
export async function pushBusybox(reg: TestRegistry, tag: string, config: Record<string, unknown> = {}, extra: TestLayer[] = []): Promise<string> {
  layer ??= busyboxImageLayer();
  const image = await buildImage([await layer, ...extra], { Env: [`PATH=${PATH}`], Cmd: ['sh'], WorkingDir: '/', ...config });
  await pushImage(reg, 'test/busybox', [tag], image);
  return `${reg.host}/test/busybox:${tag}`;
}

/** The images the container tests use, pushed to `reg`. */
export async function pushBusyboxImages(reg: TestRegistry): Promise<BusyboxImages> {
  return {
    root: await pushBusybox(reg, '1'),
    app: await pushBusybox(reg, 'app', { User: 'app' }),
    usr1: await pushBusybox(reg, 'usr1', { StopSignal: 'SIGUSR1' }),
  };
}
