// kubelet relists every second: ListPodSandbox and ListContainers with every object in them, where
// nothing but a state has changed since the last time. So each listed item keeps one summary object
// per state (summaryCache), the wire bytes of each such object are made once (listSerializer), and a
// list's answer is their concatenation: protobuf reads concatenated encodings of a message as one,
// with their repeated fields appended, so no list message is ever built or encoded whole.
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
 * A serializer for a response whose only field is the repeated `field`: each item object is encoded
 * once (as a one-item response) and remembered for as long as the object lives.
 */
export function listSerializer(serialize: grpc.serialize<unknown>, field: string): grpc.serialize<unknown> {
  const encoded = new WeakMap<object, Buffer>();
  return (value) => {
    const items = (value as Record<string, object[] | undefined>)[field] ?? [];
    return Buffer.concat(items.map((item) => {
      let bytes = encoded.get(item);
      if (!bytes) {
        bytes = serialize({ [field]: [item] });
        encoded.set(item, bytes);
      }
      return bytes;
    }));
  };
}

/** The RuntimeService definition with the relist methods' responses encoded item by item. */
export function withListSerializers(definition: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const lists: Record<string, string> = { ListContainers: 'containers', ListPodSandbox: 'items' };
  return Object.fromEntries(Object.entries(definition).map(([name, method]) => [
    name,
    lists[name] ? { ...method, responseSerialize: listSerializer(method.responseSerialize, lists[name]) } : method,
  ]));
}
