// Follows a config directory with fs.watch: `onChange` on every change; while the directory does not
// exist (yet, or any more: inotify watches die with their directory), retry until it does.
import { watch, type FSWatcher } from 'node:fs';
import { exists } from '../core/fs.js';

const WATCH_RETRY_MS = 1000;

export class DirWatcher {
  private watcher: FSWatcher | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    readonly dir: string,
    private readonly onChange: () => void,
  ) {}

  start(): void {
    if (this.closed) return;
    try {
      this.watcher = watch(this.dir, () => this.onChange());
      this.watcher.on('error', () => this.rewatch());
      // Changes between the first read and the watch starting would otherwise be missed.
      this.onChange();
    } catch {
      this.retryTimer = setTimeout(() => this.start(), WATCH_RETRY_MS);
      this.retryTimer.unref();
    }
  }

  /** Call after handling a change: notices a removed directory and waits for it to come back. */
  async checkStillThere(): Promise<void> {
    if (this.closed || !this.watcher) return;
    if (!(await exists(this.dir))) this.rewatch();
  }

  close(): void {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
    clearTimeout(this.retryTimer);
  }

  private rewatch(): void {
    this.watcher?.close();
    this.watcher = undefined;
    this.onChange();
    this.start();
  }
}
