// kubelet relists every second: ListPodSandbox and ListContainers with every object in them, where
// nothing but a state has changed since the last time. So each listed item keeps one summary object
// per state (listedSummaries), the wire bytes of each such object are made once (ListEncoder), and a
// list's answer is their concatenation: protobuf reads concatenated encodings of a message as one,
// with their repeated fields appended, so no list message is ever built or encoded whole.
// The bytes are made when a record is written, in the background, not by the first list after a
// change: after a storm of pod starts that list would otherwise encode every item at once.
import type * as grpc from '@grpc/grpc-js';

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
 * The summaries a list handler answers with: one object per record and version (the same object, so
 * its encoding is reused, while the version stays), encoded by `encoder` for each record in `table`
 * now and for each record written later, once the current turn of the event loop is done (a burst of
 * writes costs one pass, and no RPC does the encoding itself), and forgotten when a record is deleted.
 */
export function listedSummaries<R extends { id: string }, S extends object>(
  table: WatchedTable<R>, summarize: (record: R) => S, version: (record: R) => string, encoder: ListEncoder,
): { get(record: R): S } {
  const cache = new Map<string, { version: string; summary: S }>();
  const get = (record: R): S => {
    const v = version(record);
    const hit = cache.get(record.id);
    if (hit?.version === v) return hit.summary;
    const summary = summarize(record);
    cache.set(record.id, { version: v, summary });
    return summary;
  };
  const changed = new Set(table.list().map((r) => r.id));
  const warm = () => {
    const ids = [...changed];
    changed.clear();
    for (const id of ids) {
      const record = table.get(id);
      if (!record) {
        cache.delete(id);
        continue;
      }
      // A record that cannot be encoded fails the List call that lists it, which reports why.
      try {
        encoder.encode(get(record));
      } catch { /* reported by that List call */ }
    }
  };
  if (changed.size > 0) setImmediate(warm);
  table.onChange((id) => {
    if (changed.size === 0) setImmediate(warm);
    changed.add(id);
  });
  return { get };
}
