// `runc start` without a runc process. A created container's init waits, blocked, to open the exec fifo in
// runc's state dir (<root>/<id>/exec.fifo) for writing; once a reader opens it, the init writes one byte and
// execs the container's process. runc start is that reader: it reads the byte and removes the fifo, which
// is what makes runc (and readRuncState) call the container running from then on. Done here, a pod's start
// and each container's start save a runc process on their critical path (a fork of the daemon, the Go
// runtime's start, runc's state load: 8–15 ms each on a 2-core node).
import { closeSync, constants, openSync, readSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { FailedPrecondition } from '../../core/errors.js';

/** How often the wait for the init's byte asks whether the init still lives (it may die before it opens the fifo). */
const LIVENESS_POLL_MS = 50;

/**
 * Lets a created container's init run its process, as `runc start` would. `status` reads runc's view of the
 * container (readRuncState's rule); the wait ends with an error once it is no longer `created` without the
 * init having written its byte (it died, or another reader took the byte).
 */
export async function releaseCreatedInit(root: string, id: string, status: () => Promise<string | undefined>): Promise<void> {
  const fifo = join(root, id, 'exec.fifo');
  // Non-blocking: the open returns at once, and the init's blocked open for writing completes with it. The
  // pipe's readiness comes through the event loop, so no thread waits on a fifo nobody may ever write.
  // (Node opens every file close-on-exec.)
  const fd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const pipe = new Socket({ fd, readable: true, writable: false });
  let bytes = 0;
  let timer: NodeJS.Timeout | undefined;
  let waiting = true;
  try {
    await new Promise<void>((resolve, reject) => {
      pipe.on('data', (chunk: Buffer) => { bytes += chunk.length; });
      // Linux reports the fifo's end only after a writer came and went: the init wrote (or closed) and exec'd.
      pipe.once('end', resolve);
      pipe.once('error', reject);
      const check = async () => {
        const now = await status().catch(() => undefined);
        if (!waiting) return;
        if (now === 'created') { timer = setTimeout(() => void check(), LIVENESS_POLL_MS); return; }
        // The init may have written and exec'd (and its process exited) with the byte still in the pipe, unread
        // by the event loop: a second reader sees it, as runc's own last look does.
        if (bytes > 0 || pendingByte(fifo)) { bytes ||= 1; resolve(); return; }
        reject(new FailedPrecondition(now === 'running'
          ? `cannot start container "${id}": it is already running`
          : `cannot start container "${id}": its process is already dead`));
      };
      timer = setTimeout(() => void check(), LIVENESS_POLL_MS);
    });
  } finally {
    waiting = false;
    clearTimeout(timer);
    pipe.destroy();
  }
  if (bytes === 0) throw new FailedPrecondition(`cannot start container "${id}": it is already running`);
  await unlink(fifo).catch((err: NodeJS.ErrnoException) => { if (err.code !== 'ENOENT') throw err; });
}

/** Whether the fifo holds an unread byte (a non-blocking look, for the init that came and went). */
function pendingByte(fifo: string): boolean {
  let fd: number;
  try {
    fd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return false;
  }
  try {
    return readSync(fd, Buffer.alloc(1)) > 0;
  } catch {
    return false; // EAGAIN: nothing there
  } finally {
    closeSync(fd);
  }
}
