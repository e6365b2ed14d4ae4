// A removal that cannot be forgotten: its intent is written on the record before it starts, and a
// failure is recorded there with a backoff, so the background retry (pending.ts) or the next start
// finishes it even when kubelet never asks again.
import { backoff } from './network.js';
import type { PendingRemoval } from './records.js';

interface RemovableTable {
  get(id: string): { removing?: PendingRemoval } | undefined;
  update(id: string, f: (r: { removing?: PendingRemoval }) => void): unknown;
}

/** A removal just begun: retried in the background only if this try has not finished by then. */
export function removalBegun(): PendingRemoval {
  return { attempts: 0, nextAt: Date.now() + backoff(1), lastError: '' };
}

/** Runs a removal, recording its failure (with backoff) on the record for the next try. */
export async function attemptRemoval<T>(table: RemovableTable, id: string, remove: () => Promise<T>): Promise<T | undefined> {
  const record = table.get(id);
  // Removed meanwhile by whoever held its lock before (an RPC, the retry, recovery).
  if (!record) return undefined;
  if (!record.removing) table.update(id, (r) => { r.removing = removalBegun(); });
  try {
    return await remove();
  } catch (err) {
    if (table.get(id)) {
      table.update(id, (r) => {
        const attempts = (r.removing?.attempts ?? 0) + 1;
        r.removing = { attempts, nextAt: Date.now() + backoff(attempts), lastError: (err as Error).message };
      });
    }
    throw err;
  }
}
