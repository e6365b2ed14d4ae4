import { InvalidArgument } from './errors.js';

/** Collects a stream's chunks up to a byte cap, counting (and dropping) the rest. Pure. */
export class CappedBuffer {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  total = 0;
  constructor(readonly cap: number) {
    if (!Number.isInteger(cap) || cap < 0) throw new InvalidArgument(`output cap must be a non-negative integer, got ${cap}`);
  }
  push(chunk: Buffer): void {
    this.total += chunk.length;
    const room = this.cap - this.kept;
    if (room <= 0) return;
    const piece = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.chunks.push(piece);
    this.kept += piece.length;
  }
  get truncated(): boolean {
    return this.total > this.kept;
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.kept);
  }
}
