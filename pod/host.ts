// The real host mechanics behind PodHost: netns pins (netns/) and the pod's shm (through the mount helper).
import { createPodNetns, netnsExists, pinProcessNetns, removePodNetns, setNetnsSysctls } from '../netns/netns.js';
import { mountPodShm, unmountPodShm } from '../oci/runtime/pod/files.js';
import { stageMounts, unstageMounts } from '../oci/runtime/userns.js';
import type { PodHost } from './interfaces.js';

export const hostMechanics: PodHost = {
  createNetns: async (podName, paths) => { await createPodNetns(podName, { paths }); },
  removeNetns: removePodNetns,
  netnsExists,
  setNetnsSysctls,
  mountShm: mountPodShm,
  unmountShm: unmountPodShm,
  pinNetnsOf: pinProcessNetns,
  stageUserns: stageMounts,
  unstageUserns: unstageMounts,
};
