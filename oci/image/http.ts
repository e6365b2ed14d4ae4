// The HTTP requests the registry client makes, over undici's request API: its bodies are node streams, so a
// layer's bytes reach the content store and the unpack without a detour through web streams (a copy per chunk).
import type { Readable } from 'node:stream';
import { request, type Dispatcher } from 'undici';

export interface HttpInit {
  method?: 'GET' | 'HEAD' | 'POST';
  headers: Record<string, string>;
  /** A form, sent as application/x-www-form-urlencoded. */
  form?: URLSearchParams;
  signal?: AbortSignal;
  dispatcher?: Dispatcher;
}

export interface HttpAnswer {
  status: number;
  headers: { get(name: string): string | null };
  body: Readable;
  /** Reads and drops the rest of the body, so the connection can be reused. */
  discard(): Promise<void>;
}

/** One request, redirects not followed (the registry client follows them itself, minding credentials). */
export type Transport = (url: URL, init: HttpInit) => Promise<HttpAnswer>;

export const undiciTransport: Transport = async (url, init) => {
  const headers = init.form ? { ...init.headers, 'content-type': 'application/x-www-form-urlencoded' } : init.headers;
  const res = await request(url, {
    method: init.method ?? 'GET', headers, body: init.form?.toString(), signal: init.signal, dispatcher: init.dispatcher,
  });
  return {
    status: res.statusCode,
    headers: {
      get(name) {
        const v = res.headers[name.toLowerCase()];
        return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
      },
    },
    body: res.body,
    discard: () => res.body.dump(),
  };
};

/**
 * At most `limit` bytes of a body: a registry decides how much it sends, so whatever is past the limit is
 * never read, and the connection goes with it (`over` says there was more).
 */
export async function readCapped(body: Readable, limit: number): Promise<{ bytes: Buffer; over: boolean }> {
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      const room = limit - total;
      if (chunk.length > room) {
        if (room > 0) chunks.push(chunk.subarray(0, room));
        return { bytes: Buffer.concat(chunks, limit), over: true };
      }
      chunks.push(chunk);
      total += chunk.length;
    }
    return { bytes: Buffer.concat(chunks, total), over: false };
  } finally {
    // Leaving the loop early destroys the stream already; an error while reading leaves it to us.
    if (!body.destroyed) body.destroy();
  }
}
