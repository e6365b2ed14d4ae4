// Undo for multi-step operations: every step that changes the host pushes its inverse; on failure
// the inverses run newest first, each logged, none skipped because an earlier one failed.
import type { Logger } from './log.js';

interface Step {
  what: string;
  undo: () => Promise<unknown> | unknown;
  /** Skipped when an undo that ran before it failed (the record that explains the leftovers). */
  onlyIfClean?: boolean;
}

export class UndoStack {
  private readonly steps: Step[] = [];

  push(what: string, undo: () => Promise<unknown> | unknown): void {
    this.steps.push({ what, undo });
  }

  /**
   * Pushes the undo of the record that explains the steps after it: it runs only when their undos
   * all succeeded, so whatever an undo failed to remove stays explained for recovery to finish.
   */
  pushRecord(what: string, undo: () => Promise<unknown> | unknown): void {
    this.steps.push({ what, undo, onlyIfClean: true });
  }

  /** Runs every inverse in reverse order; returns the undo errors (each also logged). */
  async unwind(log: Logger): Promise<Error[]> {
    const failures: Error[] = [];
    for (const step of this.steps.splice(0).reverse()) {
      if (step.onlyIfClean && failures.length > 0) {
        log.warn({ step: step.what }, 'kept: an undo before it failed, and recovery needs it to finish the job');
        continue;
      }
      try {
        await step.undo();
        log.debug({ step: step.what }, 'undone');
      } catch (err) {
        log.error({ step: step.what, err }, 'undo failed');
        failures.push(new Error(`undo of ${step.what} failed: ${(err as Error).message}`, { cause: err }));
      }
    }
    return failures;
  }

  /** Forgets the steps: the operation succeeded and what it made stays. */
  commit(): void {
    this.steps.length = 0;
  }
}

/**
 * Runs independent steps at once. It waits for every one of them, so that no step is still changing
 * the host when an undo runs, then throws the first failure.
 */
export async function inParallel<T extends readonly unknown[]>(steps: readonly [...{ [K in keyof T]: T[K] | Promise<T[K]> }]): Promise<T> {
  const results = await Promise.allSettled(steps);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/**
 * Runs `body` with an undo stack; if it throws, unwinds the stack and rethrows the body's error
 * (the first error), with any undo failures logged.
 */
export async function withUndo<T>(log: Logger, body: (undo: UndoStack) => Promise<T>): Promise<T> {
  const undo = new UndoStack();
  try {
    const result = await body(undo);
    undo.commit();
    return result;
  } catch (err) {
    await undo.unwind(log);
    throw err;
  }
}
