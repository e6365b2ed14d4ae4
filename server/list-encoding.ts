// kubelet relists every second: ListPodSandbox and ListContainers with every object in them, where
// nothing but a state has changed since the last time. So each listed item keeps one summary object
// per state (summaryCache), the wire bytes of each such object are made once (ListEncoder), and a
// list's answer is their concatenation: protobuf reads concatenated encodings of a message as one,
// with their repeated fields appended, so no list message is ever built or encoded whole.
// The bytes are made when a record is written, in the background (warmOnChange), not by the first list
// after a change: after a storm of pod starts that list would otherwise encode every item at once.
import type * as grpc from '@grpc/grpc-js';

/** One summary object per (id, version): the same object comes back while the version stays. */
export function summaryCache<R extends { id: string }, S>(summarize: (record: R) => S, version: (record: R) => string) {
  let cache = new Map<string, { version: string; summary: S }>();
  return {
    get(record: R): S {
      const v = version(record);
      const hit = cache.get(record.id);
      if (hit?.version === v) return hit.summary;
      const summary = summarize(record);
      cache.set(record.id, { version: v, summary });
      return summary;
    },
    /** Forgets every id not among `live` (the table's whole content). */
    keepOnly(live: readonly R[]): void {
      if (cache.size <= live.length) return;
      const next = new Map<string, { version: string; summary: S }>();
      for (const r of live) {
        const hit = cache.get(r.id);
        if (hit) next.set(r.id, hit);
      }
      cache = next;
    },
  };
}

/**
 * Serializes a response whose only field is the repeated `field`: each item object is encoded once
 * (as a one-item response), by `encode` ahead of time or by the first serialization that lists it,
 * and remembered for as long as the object lives.
 */
export class ListEncoder {
  private readonly encoded = new WeakMap<object, Buffer>();

  constructor(private readonly serializeWhole: grpc.serialize<unknown>, private readonly field: string) {}

  encode(item: object): Buffer {
    let bytes = this.encoded.get(item);
    if (!bytes) {
      bytes = this.serializeWhole({ [this.field]: [item] });
      this.encoded.set(item, bytes);
    }
    return bytes;
  }

  readonly serialize: grpc.serialize<unknown> = (value) =>
    Buffer.concat(((value as Record<string, object[] | undefined>)[this.field] ?? []).map((item) => this.encode(item)));
}

/** The two relist methods' encoders, made from the RuntimeService definition. */
export interface ListEncoders {
  containers: ListEncoder;
  sandboxes: ListEncoder;
}

export function listEncoders(definition: grpc.ServiceDefinition): ListEncoders {
  return {
    containers: new ListEncoder(definition.ListContainers!.responseSerialize, 'containers'),
    sandboxes: new ListEncoder(definition.ListPodSandbox!.responseSerialize, 'items'),
  };
}

/** The RuntimeService definition with the relist methods' responses encoded item by item by `encoders`. */
export function withListEncoders(definition: grpc.ServiceDefinition, encoders: ListEncoders): grpc.ServiceDefinition {
  const lists: Record<string, ListEncoder> = { ListContainers: encoders.containers, ListPodSandbox: encoders.sandboxes };
  return Object.fromEntries(Object.entries(definition).map(([name, method]) => [
    name,
    lists[name] ? { ...method, responseSerialize: lists[name].serialize } : method,
  ]));
}

/** A table that tells who listens when a record is written or deleted. */
interface WatchedTable<R> {
  get(id: string): R | undefined;
  list(): R[];
  onChange(listener: (id: string) => void): void;
}

/**
 * Encodes the summary of each record in `table` now and of each record written to it later, once the
 * current turn of the event loop is done: a burst of writes costs one pass, and an RPC never waits for it.
 */
export function warmOnChange<R extends { id: string }>(table: WatchedTable<R>, summaryOf: (record: R) => object, encoder: ListEncoder): void {
  const written = new Set(table.list().map((r) => r.id));
  if (written.size > 0) setImmediate(warm);
  table.onChange((id) => {
    if (written.size === 0) setImmediate(warm);
    written.add(id);
  });
  function warm(): void {
    for (const id of written) {
      const record = table.get(id);
      if (record) encoder.encode(summaryOf(record));
    }
    written.clear();
  }
}
