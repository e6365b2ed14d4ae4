// Writing to a WebSocket channel with back-pressure: each chunk is one message, and the next is taken
// only once ws has handed the previous one to the socket, so a slow client slows the source (a
// process's output, a forwarded connection) instead of queueing in the daemon.
import { Writable } from 'node:stream';
import type { WebSocket } from 'ws';
import { encodeChannelMessage } from './protocol.js';

export function channelWriter(ws: WebSocket, channel: number, base64: boolean): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, cb) {
      if (ws.readyState !== ws.OPEN) return cb();
      // A send that fails means the client is gone: the session ends on the close, not on this writer.
      ws.send(encodeChannelMessage(channel, chunk, base64), () => cb());
    },
  });
}
