// Annotations that tools reading config.json (and the CRI status path) use to tell sandboxes
// from containers and find a container's pod.
import type { SpecOpt } from './opts.js';

export const ANNOTATION = {
  containerType: 'io.kubernetes.cri.container-type',
  sandboxId: 'io.kubernetes.cri.sandbox-id',
  sandboxName: 'io.kubernetes.cri.sandbox-name',
  sandboxNamespace: 'io.kubernetes.cri.sandbox-namespace',
  sandboxUid: 'io.kubernetes.cri.sandbox-uid',
  sandboxLogDirectory: 'io.kubernetes.cri.sandbox-log-directory',
  containerName: 'io.kubernetes.cri.container-name',
  imageName: 'io.kubernetes.cri.image-name',
} as const;

export interface PodIdentity {
  sandboxId: string;
  name: string;
  namespace: string;
  uid: string;
}

export function sandboxAnnotations(pod: PodIdentity, logDirectory: string, imageName: string): Record<string, string> {
  return {
    [ANNOTATION.containerType]: 'sandbox',
    [ANNOTATION.sandboxId]: pod.sandboxId,
    [ANNOTATION.sandboxName]: pod.name,
    [ANNOTATION.sandboxNamespace]: pod.namespace,
    [ANNOTATION.sandboxUid]: pod.uid,
    [ANNOTATION.sandboxLogDirectory]: logDirectory,
    [ANNOTATION.imageName]: imageName,
  };
}

export function containerAnnotations(pod: PodIdentity, containerName: string, imageName: string): Record<string, string> {
  return {
    [ANNOTATION.containerType]: 'container',
    [ANNOTATION.sandboxId]: pod.sandboxId,
    [ANNOTATION.sandboxName]: pod.name,
    [ANNOTATION.sandboxNamespace]: pod.namespace,
    [ANNOTATION.sandboxUid]: pod.uid,
    [ANNOTATION.containerName]: containerName,
    [ANNOTATION.imageName]: imageName,
  };
}

/** The config's annotations first, ours last: a pod cannot pose as another through annotations. */
export function withAnnotations(fromConfig: Readonly<Record<string, string>>, ours: Readonly<Record<string, string>>): SpecOpt {
  return (spec) => { spec.annotations = { ...spec.annotations, ...fromConfig, ...ours }; };
}
