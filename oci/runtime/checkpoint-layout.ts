// The checkpoint archive of one container, laid out as CRI-O and Podman write it, so checkpointctl and their
// restore read ours:
//   checkpoint/       CRIU's images (inventory.img, pages-*.img, ...) and runc's descriptors.json
//   config.dump       who the container was: id, name, image, runtime, when made and checkpointed, and (minicri's
//                     own fields) the pod's namespace, name and uid, so a restore goes only to that namespace (JSON)
//   spec.dump         its OCI runtime spec (the bundle's config.json)
//   rootfs-diff.tar   what it changed in its root filesystem: the overlay upper dir, whiteouts left out
//   deleted.files     what it deleted from the image's files (JSON list of absolute paths), when any
//   bind.mounts       each bind mount's source, destination and type, so a restore can make missing sources
//   stats-dump, dump.log  CRIU's statistics and log of the dump
// Everything here is pure: names, the JSON documents, and which upper dir entries go where.

export const CHECKPOINT_DIR = 'checkpoint';
export const CONFIG_DUMP = 'config.dump';
export const SPEC_DUMP = 'spec.dump';
export const ROOTFS_DIFF_TAR = 'rootfs-diff.tar';
export const DELETED_FILES = 'deleted.files';
export const BIND_MOUNTS = 'bind.mounts';
export const STATS_DUMP = 'stats-dump';
export const DUMP_LOG = 'dump.log';

/** The archive's members in the order CRI-O writes them; those a checkpoint did not make are left out. */
export function archiveMembers(present: ReadonlySet<string>): string[] {
  return [STATS_DUMP, DUMP_LOG, CHECKPOINT_DIR, CONFIG_DUMP, SPEC_DUMP, BIND_MOUNTS, ROOTFS_DIFF_TAR, DELETED_FILES]
    .filter((name) => present.has(name));
}

/** config.dump: Podman's container checkpoint metadata (checkpointctl reads the same field names). */
export interface ConfigDump {
  id: string;
  name: string;
  /** The image as the container's config asked for it. */
  rootfsImage: string;
  /** The image's id. */
  rootfsImageRef: string;
  /** The image's name as shown (checkpointctl's IMAGE column). */
  rootfsImageName: string;
  runtime: string;
  createdTime: string;
  checkpointedTime: string;
  restored: boolean;
  /** minicri's own: the pod the container ran in (checkpointctl ignores them). A restore is refused in another namespace. */
  podNamespace: string;
  podName: string;
  podUid: string;
}

export interface CheckpointedContainer {
  id: string;
  /** The name kubelet gave it (the config's metadata.name). */
  name: string;
  /** The image as the config named it, and its id. */
  image: { id: string; name: string };
  runtimeHandler: string;
  /** Unix nanoseconds, as a decimal string (CRI int64). */
  createdAt: string;
  /** The pod's metadata. */
  pod: { namespace: string; name: string; uid: string };
}

export function configDump(c: CheckpointedContainer, checkpointedAt: Date): ConfigDump {
  return {
    id: c.id,
    name: c.name,
    rootfsImage: c.image.name,
    rootfsImageRef: c.image.id,
    rootfsImageName: c.image.name,
    runtime: c.runtimeHandler,
    createdTime: rfc3339Nano(BigInt(c.createdAt)),
    checkpointedTime: rfc3339Nano(BigInt(checkpointedAt.getTime()) * 1_000_000n),
    restored: false,
    podNamespace: c.pod.namespace,
    podName: c.pod.name,
    podUid: c.pod.uid,
  };
}

/** Unix nanoseconds as RFC 3339 with the fraction Go's time.Time marshals (trailing zeros dropped). */
export function rfc3339Nano(ns: bigint): string {
  const ms = ns / 1_000_000n;
  const base = new Date(Number(ms)).toISOString().slice(0, 19);
  const frac = (((ns % 1_000_000_000n) + 1_000_000_000n) % 1_000_000_000n).toString().padStart(9, '0').replace(/0+$/, '');
  return `${base}${frac ? `.${frac}` : ''}Z`;
}

/** Mounts every container gets, which bind.mounts leaves out: a restore makes them itself. */
const RUNTIME_MOUNTS = new Set(['/dev', '/dev/shm', '/proc', '/run', '/sys']);

export interface SpecMount {
  destination: string;
  type?: string;
  source?: string;
  options?: string[];
}

/** A bind mount as bind.mounts records it (CRI-O's field names). */
export interface BindMountDump {
  source: string;
  destination: string;
  file_type: 'directory' | 'file';
  permissions: number;
}

function isBind(m: SpecMount): boolean {
  return m.type === 'bind' || (m.options ?? []).some((o) => o === 'bind' || o === 'rbind');
}

/** The bind mounts worth recording, with what `statOf` says of each source (undefined: gone, left out). */
export function bindMountsDump(
  mounts: readonly SpecMount[], statOf: (source: string) => { isDirectory: boolean; mode: number } | undefined,
): BindMountDump[] {
  const out: BindMountDump[] = [];
  for (const m of mounts) {
    if (!isBind(m) || !m.source || RUNTIME_MOUNTS.has(m.destination)) continue;
    const st = statOf(m.source);
    if (!st) continue;
    out.push({
      source: m.source, destination: m.destination, file_type: st.isDirectory ? 'directory' : 'file', permissions: st.mode & 0o7777,
    });
  }
  return out;
}

/** One entry of the overlay upper dir, by its path relative to it ("etc/hosts"). */
export interface UpperEntry {
  path: string;
  /** A whiteout hides the image's file of that name; an opaque dir hides all the image had below it. */
  kind: 'whiteout' | 'opaque-dir' | 'other';
}

/**
 * Which upper dir entries go into rootfs-diff.tar, and which image paths the container deleted. Entries at
 * or below a mount's destination are mount points the runtime made (what the container wrote there went to
 * the mounted filesystem, never to the upper dir), not the container's changes. An opaque
 * dir is both: deleting it first and unpacking the tar over it gives the same tree as the upper dir did.
 * The entries come parents first; so does `include`.
 */
export function rootfsDiff(entries: readonly UpperEntry[], mounts: readonly SpecMount[]): { include: string[]; deleted: string[] } {
  const mountPoints = mounts.map((m) => m.destination.replace(/\/+$/, '')).filter(Boolean);
  const underMount = (abs: string) => mountPoints.some((d) => abs === d || abs.startsWith(`${d}/`));
  const include: string[] = [];
  const deleted: string[] = [];
  for (const e of entries) {
    const abs = `/${e.path}`;
    if (underMount(abs)) continue;
    if (e.kind !== 'other') deleted.push(abs);
    if (e.kind !== 'whiteout') include.push(e.path);
  }
  return { include, deleted };
}
