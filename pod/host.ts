// The real host mechanics behind PodHost: the pod's directory and files, netns pins (netns/) and the pod's shm
// (through the mount helper).
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import {
  createPodNetns, holdLoopbackResets, netnsExists, pinProcessNetns, podNetnsPaths, removePodNetns, setNetnsSysctls,
} from '../netns/netns.js';
import { mountPodShm, unmountPodShm, writePodFiles } from '../oci/runtime/pod/files.js';
import { stageMounts, unstageMounts } from '../oci/runtime/userns.js';
import type { PodHost } from './interfaces.js';

const readOrEmpty = (path: string) => readFile(path, 'utf8').catch(() => '');

export const hostMechanics: PodHost = {
  makePodDir: async (dir) => { await mkdir(dir, { recursive: true, mode: 0o700 }); },
  removeDir: (dir) => rm(dir, { recursive: true, force: true }),
  nodeNameFiles: async () => {
    const [resolvConf, hosts] = await Promise.all([readOrEmpty('/etc/resolv.conf'), readOrEmpty('/etc/hosts')]);
    return { hostname: hostname(), resolvConf, hosts };
  },
  writePodFiles: async (dir, files) => { await writePodFiles(dir, files); },
  writeBundleSpec: (bundle, spec) => writeFile(join(bundle, 'config.json'), JSON.stringify(spec), { mode: 0o600 }),
  netnsPaths: podNetnsPaths,
  createNetns: async (podName, paths) => { await createPodNetns(podName, { paths }); },
  removeNetns: removePodNetns,
  netnsExists,
  setNetnsSysctls,
  holdLoopbackResets,
  mountShm: mountPodShm,
  unmountShm: unmountPodShm,
  pinNetnsOf: pinProcessNetns,
  stageUserns: stageMounts,
  unstageUserns: unstageMounts,
};
