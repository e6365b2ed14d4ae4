// Back-pressure over a WebSocket, both ways. Writing to a channel: each chunk is one message, and the
// next is taken only once ws has handed the previous one to the socket, so a slow client slows the
// source (a process's output, a forwarded connection) instead of queueing in the daemon. Reading: the
// WebSocket is paused while the session's readers are behind (client-input.ts).
import { Writable } from 'node:stream';
import type { WebSocket } from 'ws';
import { InputBudget } from './client-input.js';
import { encodeChannelMessage } from './protocol.js';

/** The input budget of a WebSocket session: pauses the WebSocket, pinging it (one at a time) meanwhile. */
export function wsInputBudget(ws: WebSocket, limit: number): InputBudget {
  let probing = false;
  const budget = new InputBudget(limit, () => ws.pause(), () => ws.resume(), () => {
    if (probing || ws.readyState !== ws.OPEN) return;
    probing = true;
    ws.ping(undefined, undefined, (err) => {
      probing = false;
      if (err) ws.terminate();
    });
  });
  ws.once('close', () => budget.close());
  return budget;
}

export function channelWriter(ws: WebSocket, channel: number, base64: boolean): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, cb) {
      if (ws.readyState !== ws.OPEN) return cb();
      // A send that fails means the client is gone: the session ends on the close, not on this writer.
      ws.send(encodeChannelMessage(channel, chunk, base64), () => cb());
    },
  });
}
