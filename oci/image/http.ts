// The HTTP requests the registry client makes, over undici's request API: its bodies are node streams, so a
// layer's bytes reach the content store and the unpack without a detour through web streams (a copy per chunk).
import type { Readable } from 'node:stream';
import { request, type Dispatcher } from 'undici';

export interface HttpInit {
  method?: 'GET' | 'POST';
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
  text(): Promise<string>;
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
    text: () => res.body.text(),
    discard: () => res.body.dump(),
  };
};
