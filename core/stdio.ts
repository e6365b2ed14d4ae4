// A streaming session's stdio: the contract between the exec/attach protocols (streaming/) and what runs
// the process (oci/runtime/exec-session.ts), so neither depends on the other.
import { EventEmitter } from 'node:events';
import type { Readable, Writable } from 'node:stream';

export interface TerminalSize {
  width: number;
  height: number;
}

/**
 * Terminal sizes from the client. Sizes can arrive before the process is there to take them, so the
 * latest is kept and handed to whoever follows later.
 */
export class TerminalSizes {
  private readonly events = new EventEmitter<{ resize: [TerminalSize] }>();
  private last: TerminalSize | undefined;

  push(size: TerminalSize): void {
    this.last = size;
    this.events.emit('resize', size);
  }

  /** Calls `fn` with the latest size (if any) and each later one; returns the unsubscribe. */
  follow(fn: (size: TerminalSize) => void): () => void {
    if (this.last) fn(this.last);
    this.events.on('resize', fn);
    return () => this.events.off('resize', fn);
  }
}

/** The client's side of a session: any of the three streams, terminal resizes, and going away. */
export interface SessionStdio {
  stdin: Readable | null;
  stdout: Writable | null;
  stderr: Writable | null;
  resize: TerminalSizes;
  /** Aborted when the client has gone away. */
  signal: AbortSignal;
}
