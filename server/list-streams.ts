// The Stream* list RPCs of cri-api 1.35+: the same lists as their List* RPCs, sent in messages of a bounded
// number of items, so no answer nears the message size limit however many objects a node holds. The
// stream then ends with OK; an empty list is no message at all.
import type { CallContext, ServerStream } from './rpc.js';

/** Items per message: about 100 KiB of containers or sandboxes, far below any client's message limit. */
export const ITEMS_PER_MESSAGE = 100;

/** A server stream sending what `list` answers for its request, as `field` of consecutive messages. */
export function streamedList<Req, Item, F extends string>(
  field: F, list: (request: Req, ctx: CallContext) => Promise<Item[]> | Item[],
): ServerStream<Req, Record<F, Item[]>> {
  return async (request, emit, ctx, stream) => {
    const items = await list(request, ctx);
    for (let i = 0; i < items.length && !stream.cancelled.aborted; i += ITEMS_PER_MESSAGE) {
      const message = { [field]: items.slice(i, i + ITEMS_PER_MESSAGE) } as Record<F, Item[]>;
      if (!emit(message)) await stream.drained();
    }
  };
}
