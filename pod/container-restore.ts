// Containers restored from checkpoint archives, CRI-O's way: CreateContainer whose image is the path of an archive
// (one CheckpointContainer wrote) makes the container from the image it was checkpointed from, with the files it
// had changed and deleted, and leaves it CREATED with CRIU's images in its directory, nothing run; StartContainer
// runs `runc restore` of them.
//
// A restore turns a file into a running process on the node, and an image field is a path any pod author
// writes: restores are off unless restore.enabled, archives come only from restore.archive_dir (kubelet's
// checkpoint directory by default) and restore only into the namespace they were checkpointed in (one pod
// author must not run another tenant's memory and files as their own), and nothing of the archive is taken
// but CRIU's images, the base image's name and the container's file changes. The spec (mounts, devices,
// security context) is the request's, as for any container; CRIU restores the processes' privileges from its
// images, so the runtime checks them against that spec once restored (oci/runtime/checkpoint-privileges.ts).
import { realpath, rm } from 'node:fs/promises';
import { isAbsolute, join, normalize } from 'node:path';
import { FailedPrecondition, InvalidArgument, NotFound, PermissionDenied } from '../core/errors.js';
import { faultPoint } from '../core/faults.js';
import type { Rootfs } from '../oci/image/snapshot.js';
import type { ImageRecord } from '../oci/image/types.js';
import {
  applyRootfsDiff, peekCheckpointImage, removeDeletedFiles, unpackCheckpointArchive, type RestoreConfigDump,
} from '../oci/runtime/checkpoint-restore.js';
import type { Logger } from '../core/log.js';
import type { Timeline } from '../core/timeline.js';
import type { PodContext, PodSettings } from './context.js';
import type { ContainerRuntime } from './interfaces.js';
import type { ContainerRecord } from './records.js';

/** Where a restored container keeps what it was unpacked from the archive, in its directory, until it starts. */
export const RESTORE_DIR = 'restore';

export type RestoreSettings = NonNullable<PodSettings['restore']>;

/**
 * The archive an image field names, when it names one (an absolute path: no image reference starts with '/'),
 * or undefined for an image reference. Refused unless restores are on and the path lies in the archive dir. Pure.
 */
export function restoreArchivePath(image: string, settings: RestoreSettings | undefined): string | undefined {
  if (!isAbsolute(image)) return undefined;
  if (!settings?.enabled) {
    throw new FailedPrecondition(`image "${image}" is a checkpoint archive, and restoring containers is off on this node: `
      + 'set restore.enabled = true in minicri\'s config to allow it, or create the container from an image reference');
  }
  const path = normalize(image);
  const dir = normalize(`${settings.archive_dir}/`);
  if (!path.startsWith(dir) || path === dir) {
    throw new InvalidArgument(
      `checkpoint archive "${image}" is not in ${settings.archive_dir} (restore.archive_dir): only archives there are restored`);
  }
  return path;
}

/**
 * PermissionDenied unless the archive was checkpointed in `namespace` (the restoring pod's), as its config.dump
 * records; an archive that records no namespace only when restore.allow_foreign_archives. Pure.
 */
export function checkArchiveNamespace(
  dump: Pick<RestoreConfigDump, 'podNamespace' | 'podName'>, namespace: string, settings: Pick<RestoreSettings, 'allow_foreign_archives'>,
  archive: string,
): void {
  if (!dump.podNamespace) {
    if (settings.allow_foreign_archives) return;
    throw new PermissionDenied(`checkpoint archive ${archive} does not record the namespace it was checkpointed in `
      + '(not one minicri wrote): it is not restored, since nothing ties it to this pod; '
      + 'set restore.allow_foreign_archives = true to restore such archives');
  }
  if (dump.podNamespace !== namespace) {
    throw new PermissionDenied(`checkpoint archive ${archive} was checkpointed in namespace "${dump.podNamespace}"`
      + `${dump.podName ? ` (pod "${dump.podName}")` : ''}: it restores only into a pod of that namespace, not of "${namespace}"`);
  }
}

export interface RestorePlan {
  /** The archive's real path. */
  archive: string;
  /** The restoring pod's namespace: the archive must have been checkpointed in it. */
  namespace: string;
  /** The image the checkpointed container ran from: the restored one is made from it. */
  image: ImageRecord;
  /** The dump carried established TCP connections (a CheckpointPod's manifest says so). */
  tcpEstablished?: boolean;
}

/**
 * For a CreateContainer whose image names an archive: the archive, checked (against the pod's `namespace` too),
 * and the image it needs on this node.
 */
export async function planRestore(ctx: PodContext, image: string, namespace: string): Promise<RestorePlan | undefined> {
  const settings = ctx.settings.restore;
  const named = restoreArchivePath(image, settings);
  if (!named || !settings) return undefined;
  return planArchiveRestore(ctx, await realPathInArchiveDir(named, settings, `checkpoint archive ${named}`), namespace);
}

/** The real path of `named`, which must lie in restore.archive_dir with symlinks followed, as the file itself. */
export async function realPathInArchiveDir(named: string, settings: RestoreSettings, what: string): Promise<string> {
  const [real, dir] = await Promise.all([
    realpath(named).catch(() => { throw new NotFound(`${what} does not exist`); }),
    realpath(settings.archive_dir).catch(() => settings.archive_dir),
  ]);
  if (!real.startsWith(`${dir}/`)) {
    throw new InvalidArgument(`${what} leads to ${real}, outside ${settings.archive_dir} (restore.archive_dir)`);
  }
  return real;
}

/** A restore from the archive at the real path `archive`, checked against the restoring pod's `namespace`. */
export async function planArchiveRestore(ctx: PodContext, archive: string, namespace: string): Promise<RestorePlan> {
  const settings = ctx.settings.restore!;
  const dump = await peekCheckpointImage(archive, settings.max_archive_bytes);
  checkArchiveNamespace(dump, namespace, settings, archive);
  return { archive, namespace, image: baseImage(ctx, dump, archive) };
}

function baseImage(ctx: PodContext, dump: { rootfsImageRef: string; rootfsImage: string }, archive: string): ImageRecord {
  for (const ref of [dump.rootfsImageRef, dump.rootfsImage].filter(Boolean)) {
    try {
      return ctx.images.resolve(ref);
    } catch (err) {
      if (!(err instanceof NotFound)) throw err;
    }
  }
  throw new FailedPrecondition(`checkpoint archive ${archive} was taken from image "${dump.rootfsImage}" (${dump.rootfsImageRef}), `
    + 'which is not on this node: pull it (by digest) before restoring');
}

/**
 * CreateContainer's restore step: CRIU's images into the container's directory, then the deletions and the
 * rootfs diff applied to its new root filesystem (deleting first: an opaque directory is both deleted and in the
 * diff). The record names the images; what else was unpacked goes.
 */
export async function unpackRestore(
  ctx: PodContext, plan: RestorePlan, rootfs: Rootfs, containerDir: string, b: { t: Timeline; log: Logger },
): Promise<void> {
  const settings = ctx.settings.restore!;
  const max = settings.max_archive_bytes;
  const dir = join(containerDir, RESTORE_DIR);
  const unpacked = await b.t.step('restore-unpack', () => unpackCheckpointArchive(plan.archive, dir, max));
  // Read again: the archive may have been replaced since planRestore peeked at it.
  checkArchiveNamespace(unpacked.config, plan.namespace, settings, plan.archive);
  if (![unpacked.config.rootfsImageRef, unpacked.config.rootfsImage].some((ref) => ref && baseMatches(ctx, ref, plan.image))) {
    throw new InvalidArgument(`checkpoint archive ${plan.archive} changed while it was read: restore it again`);
  }
  await b.t.step('restore-rootfs', async () => {
    await removeDeletedFiles(rootfs.path, unpacked.deleted);
    if (unpacked.rootfsDiff) await applyRootfsDiff(unpacked.rootfsDiff, rootfs.path, max);
  });
  await Promise.all(['config.dump', 'rootfs-diff.tar', 'deleted.files'].map((f) => rm(join(dir, f), { force: true })));
  faultPoint('container-restore-unpacked');
  b.log.info({ archive: plan.archive, image: plan.image.id }, 'checkpoint unpacked for a restore');
}

function baseMatches(ctx: PodContext, ref: string, image: ImageRecord): boolean {
  try {
    return ctx.images.resolve(ref).id === image.id;
  } catch {
    return false;
  }
}

/** CRIU's images of a restored container that has not started yet. */
export function restoreImages(record: ContainerRecord): string | undefined {
  return record.restoring ? join(record.dir, RESTORE_DIR, 'checkpoint') : undefined;
}

/**
 * StartContainer of a restored container: `runc restore` under a new conmon; the images (every memory page of the
 * container) go whatever happened.
 */
export async function runRestore(runtime: ContainerRuntime, record: ContainerRecord, imagePath: string): Promise<number> {
  const { config } = record;
  try {
    const { pid } = await runtime.restore({
      id: record.id, bundle: record.dir, logPath: record.logPath || '/dev/null', stdin: config.stdin, stdinOnce: config.stdin_once,
      tty: config.tty, imagePath, tcpEstablished: record.restoreTcp,
    });
    return pid;
  } finally {
    await rm(join(record.dir, RESTORE_DIR), { recursive: true, force: true });
  }
}
