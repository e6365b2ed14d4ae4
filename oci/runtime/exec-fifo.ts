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
import { FailedPrecondition, NotFound, type MinicriError } from '../../core/errors.js';
import { sleep } from '../../core/time.js';

/** How often the wait for the init's byte asks whether the init still lives (it may die before it opens the fifo). */
const LIVENESS_POLL_MS = 50;
/** How long a fifo's end without a byte may leave the container `created` (the init exiting, another start's unlink). */
const SETTLE_MS = 2_000;

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
  let fd: number;
  try {
    fd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    // Gone since the caller's look: removed with its container, or taken by another start (which unlinks it).
    throw refusal(id, await status());
  }
  let pipe: Socket;
  try {
    pipe = new Socket({ fd, readable: true, writable: false });
  } catch (err) {
    closeSync(fd); // the socket never owned it (not a fifo, say)
    throw err;
  }
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
        let now: string | undefined;
        try {
          now = await status();
        } catch (err) {
          reject(err);
          return;
        }
        if (!waiting) return;
        if (now === 'created') { timer = setTimeout(() => void check(), LIVENESS_POLL_MS); return; }
        // The init may have written and exec'd (and its process exited) with the byte still in the pipe, unread
        // by the event loop: a second reader sees it, as runc's own last look does.
        if (bytes > 0 || pendingByte(fifo)) { bytes ||= 1; resolve(); return; }
        reject(refusal(id, now));
      };
      timer = setTimeout(() => void check(), LIVENESS_POLL_MS);
    });
  } finally {
    waiting = false;
    clearTimeout(timer);
    pipe.destroy();
  }
  // A writer came and went without a byte for us: the init died before writing, or another start read it.
  // Which one, its liveness tells, once it settles.
  if (bytes === 0) throw refusal(id, await settled(status));
  await unlink(fifo).catch((err: NodeJS.ErrnoException) => { if (err.code !== 'ENOENT') throw err; });
}

/** runc start's refusal for a container whose status is `now` (undefined: runc does not know it). */
function refusal(id: string, now: string | undefined): MinicriError {
  if (now === undefined) return new NotFound(`cannot start container "${id}": it does not exist`);
  return new FailedPrecondition(now === 'running'
    ? `cannot start container "${id}": it is already running`
    : `cannot start container "${id}": its process is already dead`);
}

/** The status once it is no longer `created`; `running` if it stays so (another start between its read and its unlink). */
async function settled(status: () => Promise<string | undefined>): Promise<string | undefined> {
  for (let waited = 0; waited < SETTLE_MS; waited += LIVENESS_POLL_MS) {
    const now = await status();
    if (now !== 'created') return now;
    await sleep(LIVENESS_POLL_MS);
  }
  return 'running';
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
