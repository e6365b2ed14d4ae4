// Unpacked layers (one directory per diff id, shared by every image that has it) and the overlayfs root
// filesystems stacked from them, one per container with its own upper and work directories.
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chown, lstat, mkdir, readdir, readFile, rename, rm, stat, symlink, readlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { AlreadyExists, FailedPrecondition, Internal, InvalidArgument, ResourceExhausted } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { isMounted, mountedPaths } from '../../mounter/mounter.js';
import { idmapMount, MountError, mount, unmount, unmountIfMounted, type IdRange } from '../../mounter/mounter.js';
import { hexOf } from './content.js';
import { SingleFlight } from '../../core/locks.js';
import { unpackLayerBlob, type BlobToWrite } from './unpack.js';
import { unpackInWorker, unpacksInWorker } from './unpack-pool.js';
import { diskUsage, writableLayerUsage, type UsageCache, type Usage } from './usage.js';
import { exists } from '../../core/fs.js';

/** Mount data must fit in one page; lowerdirs are given as short names relative to the link dir to stay under it. */
const MAX_MOUNT_DATA = 4000;
const LINK_LEN = 16;
const KEY_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export interface RootfsMount { type: 'overlay'; source: 'overlay'; options: string[] }

export interface Rootfs {
  key: string;
  imageId: string;
  /** The container's root filesystem: the overlay's merged directory, or the layer itself when read-only. */
  path: string;
  /** The overlay; absent for a read-only root, which needs no mount. */
  mount?: RootfsMount;
  layers: string[];
  mounted: boolean;
  /** The image's only layer, shared: the container must get it read-only. */
  readOnly: boolean;
  /** An overlay of id-mapped layers (a user-namespaced pod's): its files show the pod's ids. */
  idmapped?: boolean;
}

/** The id mapping of a user-namespaced pod, for its containers' root filesystems. */
export interface RootfsIdmap { uids: IdRange[]; gids: IdRange[] }

export interface RootfsOptions {
  /**
   * Use the image's layer itself as a read-only root, with no overlay to mount, when the image has one layer
   * holding each of these directories (the mount points the runtime would otherwise create in it).
   */
  readOnlyWith?: string[];
  /**
   * A user-namespaced pod's mapping: the overlay stacks id-mapped mounts of the layers (which stay as they
   * are on disk, shared with every other user) and its upper dir belongs to the pod's root, so the files
   * show their image owners inside the pod. A read-only root is left to the caller to id-map.
   */
  idmap?: RootfsIdmap;
}

/** A rootfs whose metadata is written (so gc keeps its layers) but which may still need its mount. */
export interface ReservedRootfs { rootfs: Rootfs; created: boolean }

/**
 * Lowerdirs top first, each layer once. overlayfs refuses a directory listed twice, and an image may repeat a
 * layer (empty layers often are); only the topmost copy matters, since it re-applies everything the lower one had.
 */
export function lowerOrder(layers: readonly string[]): string[] {
  return [...new Set([...layers].reverse())];
}

interface RootfsMeta { imageId: string; layers: string[]; createdAt: number; readOnly?: boolean; idmap?: RootfsIdmap }

export class LayerStore {
  private readonly layersDir: string;
  private readonly linkDir: string;
  private readonly rootfsDir: string;
  private readonly unpacks = new SingleFlight<boolean>();
  /** Layers never change once in place, so their disk usage is measured once. */
  private readonly usages = new Map<string, Usage>();

  /**
   * `rootfsDir` may be on another filesystem than `root` (the writable layers' own): lowerdirs may cross filesystems.
   * `writable` is where the writable layers' usage is cached: the daemon's one cache, which stats use too.
   */
  constructor(
    root: string, private readonly tmpDir: string, private readonly log: Logger, rootfsDir = join(root, 'rootfs'),
    private readonly writable: UsageCache = writableLayerUsage,
  ) {
    this.layersDir = join(root, 'layers');
    this.linkDir = join(root, 'l');
    this.rootfsDir = rootfsDir;
  }

  async init(): Promise<void> {
    for (const d of [this.layersDir, this.linkDir, this.rootfsDir, this.tmpDir]) await mkdir(d, { recursive: true });
  }

  dir(diffId: string): string {
    return join(this.layersDir, hexOf(diffId));
  }

  async has(diffId: string): Promise<boolean> {
    return exists(this.dir(diffId));
  }

  /**
   * Unpacks the blob as layer `diffId` unless present. The layer is built in a temp dir and renamed into place,
   * so a crash leaves no half layer; a blob whose content does not hash to diffId is refused. True if unpacked.
   */
  ensure(diffId: string, blobFile: string, what: string): Promise<boolean> {
    return this.unpacks.do(diffId, async () => {
      if (await this.has(diffId)) return false;
      await this.unpack(diffId, createReadStream(blobFile, { highWaterMark: 1 << 20 }), what, (await stat(blobFile)).size);
      return true;
    });
  }

  /**
   * Unpacks `source` (a layer blob's bytes, possibly still downloading) as layer `diffId`: into a temp dir,
   * checked against diffId (and, with `blob`, checked against its digest and size, and written to blob.tmp when
   * given), then `beforeCommit` (which puts a kept blob in the store), then renamed into place.
   * Any failure, the source's included, removes what was unpacked.
   */
  async unpack(
    diffId: string, source: Readable, what: string, size: number, blob?: BlobToWrite, beforeCommit?: () => Promise<void>,
  ): Promise<void> {
    const tmp = join(this.tmpDir, `layer-${randomBytes(8).toString('hex')}`);
    try {
      const { diffId: got } = unpacksInWorker(size)
        ? await unpackInWorker(source, tmp, what, blob)
        : await unpackLayerBlob(source, tmp, what, this.log, blob);
      if (got !== diffId) throw new InvalidArgument(`${what} unpacks to ${got}, but the image config says ${diffId}: the image is corrupt`);
      await beforeCommit?.();
      // Another pull may have put the same layer in place meanwhile: theirs is as good as ours.
      await rename(tmp, this.dir(diffId)).catch(async (err: NodeJS.ErrnoException) => {
        if (!((err.code === 'ENOTEMPTY' || err.code === 'EEXIST') && await this.has(diffId))) throw err;
      });
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }

  async list(): Promise<string[]> {
    return (await readdir(this.layersDir)).filter((n) => /^[a-f0-9]{64}$/.test(n)).map((n) => `sha256:${n}`);
  }

  /** Blocks and inodes a layer takes (hardlinks counted once). */
  async usage(diffId: string): Promise<Usage> {
    const cached = this.usages.get(diffId);
    if (cached) return cached;
    const u = await diskUsage(this.dir(diffId));
    this.usages.set(diffId, u);
    return u;
  }

  async delete(diffId: string): Promise<void> {
    this.usages.delete(diffId);
    const hex = hexOf(diffId);
    await rm(join(this.linkDir, hex.slice(0, LINK_LEN)), { force: true });
    await rm(join(this.layersDir, hex), { recursive: true, force: true });
  }

  /** A short name in the link dir for the layer, so many lowerdirs fit in the mount data. */
  private async link(diffId: string): Promise<string> {
    const hex = hexOf(diffId);
    const name = hex.slice(0, LINK_LEN);
    const target = `../layers/${hex}`;
    const path = join(this.linkDir, name);
    const existing = await readlink(path).catch(() => undefined);
    if (existing === undefined) await symlink(target, path);
    else if (existing !== target) throw new Internal(`layer link ${path} points at ${existing}, not ${target}: two layers share a prefix`);
    return name;
  }

  // ---- root filesystems ----

  private rootfsPath(key: string): string {
    if (!KEY_RE.test(key)) throw new InvalidArgument(`rootfs key "${key}" must be 1-128 characters of [A-Za-z0-9_.-]`);
    return join(this.rootfsDir, key);
  }

  /**
   * Writes the metadata of rootfs `key` for an image's `layers` (bottom first), which keeps those layers from gc;
   * mountRootfs() then makes it usable. Idempotent for the same image: an existing rootfs is returned (to be
   * mounted again after a reboot); one for another image is AlreadyExists.
   */
  async reserveRootfs(key: string, imageId: string, layers: string[], opts: RootfsOptions = {}): Promise<ReservedRootfs> {
    const dir = this.rootfsPath(key);
    const existing = await this.readMeta(key);
    if (existing && existing.imageId !== imageId) {
      throw new AlreadyExists(`rootfs "${key}" already exists for image ${existing.imageId}: remove it first`);
    }
    for (const l of layers) {
      if (!(await this.has(l))) throw new FailedPrecondition(`layer ${l} of image ${imageId} is missing: pull the image again`);
    }
    if (existing) return { rootfs: await this.describe(key, existing), created: false };
    const readOnly = opts.readOnlyWith !== undefined && layers.length === 1 && await hasDirs(this.dir(layers[0]!), opts.readOnlyWith);
    const meta: RootfsMeta = {
      imageId, layers, createdAt: Date.now(), ...(readOnly ? { readOnly } : {}), ...(opts.idmap ? { idmap: opts.idmap } : {}),
    };
    await mkdir(dir);
    try {
      await writeFile(join(dir, 'meta.json'), JSON.stringify(meta));
      if (!readOnly) for (const d of ['upper', 'work', 'merged', 'empty']) await mkdir(join(dir, d), { mode: 0o755 });
      if (!readOnly && opts.idmap) {
        // What the pod writes is its root's on the host too: copy-ups and new files get the pod's ids.
        const root = rootOnHost(opts.idmap);
        for (const d of ['upper', 'work']) await chown(join(dir, d), root.uid, root.gid);
      }
      return { rootfs: await this.describe(key, meta), created: true };
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** Mounts a reserved rootfs's overlay unless it is mounted (or needs none); a new one is removed on failure. */
  async mountRootfs({ rootfs, created }: ReservedRootfs): Promise<Rootfs> {
    if (rootfs.mounted || !rootfs.mount) return rootfs;
    const started = Date.now();
    try {
      const dir = this.rootfsPath(rootfs.key);
      const idmap = (await this.readMeta(rootfs.key))?.idmap;
      const lower: string[] = [];
      if (idmap) lower.push(...await this.idmappedLayers(dir, rootfs.layers, idmap));
      else for (const l of lowerOrder(rootfs.layers)) lower.push(await this.link(l));
      if (lower.length === 0) lower.push(join(dir, 'empty'));
      const data = `lowerdir=${lower.join(':')},upperdir=${join(dir, 'upper')},workdir=${join(dir, 'work')}`;
      if (data.length > MAX_MOUNT_DATA) {
        throw new ResourceExhausted(`image ${rootfs.imageId} has too many layers (${rootfs.layers.length}) for one overlay mount`);
      }
      try {
        // Relative lowerdirs resolve against the mount's cwd: the link dir, or the rootfs dir for id-mapped layers.
        await mount({ source: 'overlay', target: rootfs.path, fstype: 'overlay', data, cwd: idmap ? dir : this.linkDir });
      } finally {
        // The overlay holds its own copies of the layer mounts: the staged ones go at once.
        if (idmap) await this.unstageLayers(dir);
      }
      const ms = Date.now() - started;
      this.log.debug({ key: rootfs.key, imageId: rootfs.imageId, layers: rootfs.layers.length, ms }, 'rootfs mounted');
      return { ...rootfs, mounted: true };
    } catch (err) {
      if (created) await rm(this.rootfsPath(rootfs.key), { recursive: true, force: true });
      if (err instanceof MountError) throw new Internal(`mounting rootfs "${rootfs.key}" failed: ${err.message}`, { cause: err });
      throw err;
    }
  }

  /** Id-mapped mounts of the layers at `<dir>/idmap/<n>`, top first; their names relative to `dir`. */
  private async idmappedLayers(dir: string, layers: readonly string[], idmap: RootfsIdmap): Promise<string[]> {
    await this.unstageLayers(dir);
    const names: string[] = [];
    try {
      for (const [i, l] of lowerOrder(layers).entries()) {
        const name = `idmap/${i}`;
        await mkdir(join(dir, name), { recursive: true, mode: 0o700 });
        await idmapMount(this.dir(l), join(dir, name), idmap);
        names.push(name);
      }
    } catch (err) {
      await this.unstageLayers(dir);
      throw err;
    }
    return names;
  }

  /** Unmounts and removes the staged layer mounts under `<dir>/idmap` (never deleting through a mount). */
  private async unstageLayers(dir: string): Promise<void> {
    const staging = join(dir, 'idmap');
    const entries = await readdir(staging).catch(() => [] as string[]);
    for (const e of entries) {
      // Lazy: a layer mount is never busy for long, and nothing may delete through it.
      while (await unmountIfMounted(join(staging, e), { lazy: true })) { /* stacked: unmount again */ }
    }
    await rm(staging, { recursive: true, force: true });
  }

  /** Unmounts and deletes the rootfs; nothing to do when it does not exist. */
  async removeRootfs(key: string): Promise<void> {
    const dir = this.rootfsPath(key);
    // Staged layer mounts a crash left: gone first, so the delete below never reaches into a layer.
    await this.unstageLayers(dir);
    const merged = join(dir, 'merged');
    try {
      await unmountIfMounted(merged);
    } catch (err) {
      // Busy (a process still holds it): detach now, the kernel frees it when the last user goes.
      if (!(err instanceof MountError && err.code === 'EBUSY')) throw err;
      await unmount(merged, { lazy: true });
    }
    await rm(dir, { recursive: true, force: true });
  }

  async listRootfs(): Promise<Rootfs[]> {
    const out: Rootfs[] = [];
    // One reading of the mount table for all: a node's hundreds of pods made one each the slowest part of a start.
    const mounted = await mountedPaths();
    for (const key of await readdir(this.rootfsDir)) {
      const meta = await this.readMeta(key);
      if (meta) out.push(await this.describe(key, meta, mounted));
    }
    return out;
  }

  /**
   * Blocks and inodes the writable layers take: every rootfs's upper and work dirs (never its mounted view), as
   * the usage cache has them (up to `maxAgeMs` old, 10 s by default; a layer whose first walk has not ended yet counts as empty).
   */
  async writableUsage(maxAgeMs?: number): Promise<Usage> {
    const total: Usage = { bytes: 0, inodes: 0 };
    for (const key of await readdir(this.rootfsDir)) {
      if (!KEY_RE.test(key)) continue;
      for (const d of ['upper', 'work']) {
        const u = await this.writable.get(join(this.rootfsDir, key, d), maxAgeMs);
        total.bytes += u?.bytes ?? 0;
        total.inodes += u?.inodes ?? 0;
      }
    }
    return total;
  }

  /** Removes rootfs dirs a crash left before their metadata was written. */
  async cleanIncompleteRootfs(): Promise<void> {
    for (const key of await readdir(this.rootfsDir)) {
      if (KEY_RE.test(key) && !(await this.readMeta(key))) await this.removeRootfs(key);
    }
  }

  private async readMeta(key: string): Promise<RootfsMeta | undefined> {
    try {
      return JSON.parse(await readFile(join(this.rootfsPath(key), 'meta.json'), 'utf8')) as RootfsMeta;
    } catch {
      return undefined;
    }
  }

  /** `mounted`: the mount points read once for a listing; without it, read for this one. */
  private async describe(key: string, meta: RootfsMeta, mounted?: Set<string>): Promise<Rootfs> {
    if (meta.readOnly) {
      const path = this.dir(meta.layers[0]!);
      return { key, imageId: meta.imageId, path, layers: meta.layers, mounted: true, readOnly: true, idmapped: false };
    }
    const dir = this.rootfsPath(key);
    const lower = meta.layers.length ? lowerOrder(meta.layers).map((l) => this.dir(l)) : [join(dir, 'empty')];
    const path = join(dir, 'merged');
    return {
      key,
      imageId: meta.imageId,
      path,
      layers: meta.layers,
      mount: {
        type: 'overlay', source: 'overlay',
        options: [`lowerdir=${lower.join(':')}`, `upperdir=${join(dir, 'upper')}`, `workdir=${join(dir, 'work')}`],
      },
      mounted: mounted ? mounted.has(path) : await isMounted(path),
      readOnly: false,
      idmapped: !!meta.idmap,
    };
  }
}

/** The host ids of the pod's root (container id 0). */
function rootOnHost(idmap: RootfsIdmap): { uid: number; gid: number } {
  const host = (ranges: readonly IdRange[]) => ranges.find((r) => r.containerId === 0)?.hostId;
  const uid = host(idmap.uids);
  const gid = host(idmap.gids);
  if (uid === undefined || gid === undefined) throw new InvalidArgument('the id mapping of a root filesystem must map container id 0');
  return { uid, gid };
}

/** Whether each of `paths` (absolute, inside `root`) is a real directory there, not a symlink. */
async function hasDirs(root: string, paths: string[]): Promise<boolean> {
  const found = await Promise.all(paths.map((p) => lstat(join(root, p)).then((st) => st.isDirectory(), () => false)));
  return found.every(Boolean);
}
