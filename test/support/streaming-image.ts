// A runnable image for the streaming tests: Debian's dynamic busybox with its shared libraries and
// a symlink per applet (sh, cat, tty, stty, httpd, sleep, ...), pushed to a test registry.
import { readFile, realpath } from 'node:fs/promises';
import { execa } from 'execa';
import type { TestRegistry } from './registry.js';
import { buildImage, pushImage, type TarEntry } from './test-images.js';

/** The libraries `ldd` lists for a binary (the dynamic loader included), as absolute paths. */
async function sharedLibraries(binary: string): Promise<string[]> {
  const { stdout } = await execa('ldd', [binary]);
  return [...stdout.matchAll(/(\/\S+) \(0x/g)].map((m) => m[1]!);
}

export async function busyboxStreamingLayer(): Promise<TarEntry[]> {
  const busybox = await realpath('/bin/busybox');
  const applets = (await execa(busybox, ['--list'])).stdout.split('\n').filter((a) => /^[a-z0-9_.-]+$/.test(a) && a !== 'busybox');
  const entries: TarEntry[] = [
    { name: 'bin/', type: 'directory' },
    { name: 'bin/busybox', data: await readFile(busybox), mode: 0o755 },
    ...applets.map((a) => ({ name: `bin/${a}`, type: 'symlink' as const, linkname: 'busybox' })),
    { name: 'etc/', type: 'directory' },
    { name: 'etc/passwd', data: 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' },
    { name: 'etc/group', data: 'root:x:0:\nnogroup:x:65534:\n' },
    { name: 'tmp/', type: 'directory', mode: 0o1777 },
    { name: 'www/', type: 'directory' },
    { name: 'www/index.html', data: 'hello from the pod\n' },
  ];
  const dirs = new Set<string>();
  for (const lib of await sharedLibraries(busybox)) {
    const parts = lib.slice(1).split('/');
    for (let i = 1; i < parts.length; i++) dirs.add(`${parts.slice(0, i).join('/')}/`);
    // Copy the file a symlinked path points at, under the path the loader looks for.
    entries.push({ name: lib.slice(1), data: await readFile(await realpath(lib)), mode: 0o755 });
  }
  entries.splice(1, 0, ...[...dirs].sort().map((d) => ({ name: d, type: 'directory' as const })));
  return entries;
}

/** Builds and pushes the image; returns its reference on the registry. */
export async function pushStreamingImage(reg: TestRegistry, repository = 'minicri-streaming/busybox'): Promise<string> {
  const img = await buildImage([{ entries: await busyboxStreamingLayer() }], {
    Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
    Cmd: ['sh'],
  });
  await pushImage(reg, repository, ['1'], img);
  return `${reg.host}/${repository}:1`;
}
