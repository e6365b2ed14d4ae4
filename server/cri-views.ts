// The domain's records as the CRI messages that answer for them.
import type { Container } from '../gen/runtime/v1/Container.js';
import type { ContainerStatus } from '../gen/runtime/v1/ContainerStatus.js';
import type { Image } from '../gen/runtime/v1/Image.js';
import type { PodSandbox } from '../gen/runtime/v1/PodSandbox.js';
import type { PodSandboxStatus } from '../gen/runtime/v1/PodSandboxStatus.js';
import { imageUser } from '../oci/image/images.js';
import { parseReference, refName } from '../oci/image/reference.js';
import type { ImageRecord } from '../oci/image/types.js';
import type { ContainerRecord, SandboxRecord } from '../pod/records.js';
import { criSignalOf } from '../pod/stop-signal.js';

export function sandboxSummary(r: SandboxRecord): PodSandbox {
  return {
    id: r.id, metadata: r.config.metadata, state: r.state, created_at: r.createdAt,
    labels: r.config.labels, annotations: r.config.annotations, runtime_handler: r.runtimeHandler,
  };
}

export function sandboxStatus(r: SandboxRecord): PodSandboxStatus {
  const [ip = '', ...additional] = r.ips;
  return {
    id: r.id,
    metadata: r.config.metadata,
    state: r.state,
    created_at: r.createdAt,
    network: { ip, additional_ips: additional.map((a) => ({ ip: a })) },
    linux: { namespaces: { options: r.config.linux?.security_context?.namespace_options ?? {} } },
    labels: r.config.labels,
    annotations: r.config.annotations,
    runtime_handler: r.runtimeHandler,
  };
}

/** The container's image: `image` as the client named it in CreateContainer, and user_specified_image only when
 *  the client gave one (kubelet passes the pod spec's image there and a resolved reference in `image`). */
function imageSpec(r: ContainerRecord): { image: string; user_specified_image: string } {
  return { image: r.image.name, user_specified_image: r.config.image?.user_specified_image ?? '' };
}

export function containerSummary(r: ContainerRecord): Container {
  return {
    id: r.id, pod_sandbox_id: r.sandboxId, metadata: r.config.metadata,
    image: imageSpec(r),
    // The image ID, as containerd lists it: kubelets before 1.30 (no image_id) take this field as the ID their
    // image GC matches against ListImages. ContainerStatus gives the digested reference, for the pod status.
    image_ref: r.image.id, image_id: r.image.id, state: r.state, created_at: r.createdAt,
    labels: r.config.labels, annotations: r.config.annotations,
  };
}

/**
 * The image a pod's status shows, as containerd and CRI-O answer it rather than the id kubelet created the container
 * with: the image's first repo tag; for an image pulled by digest only, its repo digest (the one the pod spec named,
 * when it is one of them); once the image is gone, the name the container was created with.
 */
export function statusImageName(r: ContainerRecord, image: ImageRecord | undefined): string {
  if (!image) return r.image.name;
  if (image.repoTags[0]) return image.repoTags[0];
  const asked = digestReference(r.config.image?.user_specified_image ?? '');
  return (asked && image.repoDigests.includes(asked) ? asked : image.repoDigests[0]) ?? r.image.name;
}

/** `name@digest` as repo digests are kept, for a reference naming a digest; undefined for anything else. */
function digestReference(reference: string): string | undefined {
  try {
    const ref = parseReference(reference);
    return ref.digest ? `${refName(ref)}@${ref.digest}` : undefined;
  } catch {
    return undefined;
  }
}

/** Where ContainerStatus finds the container's image record as it is now (the image service). */
export interface ImageRecords { status(id: string): ImageRecord | undefined }

export function containerStatus(r: ContainerRecord, images: ImageRecords): ContainerStatus {
  return {
    id: r.id, metadata: r.config.metadata, state: r.state,
    created_at: r.createdAt, started_at: r.startedAt, finished_at: r.finishedAt, exit_code: r.exitCode,
    image: { ...imageSpec(r), image: statusImageName(r, images.status(r.image.id)) },
    image_ref: r.image.ref, image_id: r.image.id, reason: r.reason, message: r.message,
    labels: r.config.labels, annotations: r.config.annotations,
    mounts: r.config.mounts, log_path: r.logPath,
    resources: r.config.linux?.resources ? { linux: r.config.linux.resources } : null,
    user: r.user
      ? { linux: { uid: String(r.user.uid), gid: String(r.user.gid), supplemental_groups: r.user.additionalGids.map(String) } }
      : null,
    // By number, which every cri-api version's names encode alike.
    stop_signal: criSignalOf(r.stopSignal) as ContainerStatus['stop_signal'],
  };
}

export function criImage(r: ImageRecord): Image {
  const user = imageUser(r.config.user);
  return {
    id: r.id, repo_tags: r.repoTags, repo_digests: r.repoDigests, size: String(r.size),
    uid: user.uid === undefined ? null : { value: String(user.uid) }, username: user.username ?? '',
    spec: { image: r.id }, pinned: r.pinned,
  };
}
