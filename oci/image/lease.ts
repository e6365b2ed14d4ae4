// Leases: the blobs and layers in-flight pulls and imports rely on, kept from garbage collection; a pull's
// lease is also its intent in the state store, so what a crash cut off is known at the next start.
import { randomBytes } from 'node:crypto';

/**
 * A pull under way: written before the pull touches the disk and rewritten as it leases blobs and layers,
 * deleted once its image record is committed (or the pull failed and was cleaned up). One found at start
 * names a pull a crash cut off; what it leased and no image uses is collected then.
 */
export interface PullIntent {
  id: string;
  reference: string;
  startedAt: number;
  /** Blob digests and layer diff ids the pull may have written. */
  leased: string[];
}

export interface PullIntentRepository {
  list(): PullIntent[];
  put(p: PullIntent): void;
  delete(id: string): void;
}

/** Hold each key before it is written; release when the image record is committed (or the work failed). */
export interface Lease {
  hold(key: string): void;
  release(): void;
}

export class Leases {
  /** Keys held now, with how many leases hold each. */
  private readonly active = new Map<string, number>();

  constructor(private readonly intents?: PullIntentRepository) {}

  /** Everything some lease holds: garbage collection keeps it. */
  held(): Iterable<string> {
    return this.active.keys();
  }

  /** A new lease; `pulling` names a pull's reference, whose intent is written before any key is held. */
  open(pulling?: string): Lease {
    const held: string[] = [];
    const intents = pulling === undefined ? undefined : this.intents;
    const intent = { id: randomBytes(8).toString('hex'), reference: pulling ?? '', startedAt: Date.now() };
    // The table keeps what it is given: it gets a copy, never the list this lease goes on growing.
    const record = () => intents?.put({ ...intent, leased: [...held] });
    record();
    return {
      hold: (key) => {
        held.push(key);
        this.active.set(key, (this.active.get(key) ?? 0) + 1);
        record();
      },
      release: () => {
        for (const key of held.splice(0)) {
          const n = (this.active.get(key) ?? 1) - 1;
          if (n > 0) this.active.set(key, n);
          else this.active.delete(key);
        }
        intents?.delete(intent.id);
      },
    };
  }
}
