// Types for the parts of hpack.js (plain JS, ships no types) that server/authority-filter.ts uses.
declare module 'hpack.js' {
  /** A header field as the compressor takes it. Strings carry one byte per char (latin1). */
  export interface HpackField {
    name: string;
    value: string;
    /** Emit as "never indexed" (RFC 7541 §6.2.3): keeps sensitive values out of every table. */
    neverIndex?: boolean;
    /** false: emit the string literally instead of Huffman-coding it. */
    huffman?: boolean;
    /** false: do not add the field to the encoder's dynamic table. */
    incremental?: boolean;
  }

  export interface HpackDecodedField {
    name: string;
    value: string;
    neverIndex: boolean;
  }

  export interface HpackOptions {
    /** maxSize is both the initial dynamic table size and the largest size update accepted. */
    table: { maxSize: number; lookupDepth?: number };
  }

  export interface HpackDecompressor {
    write(block: Buffer): boolean;
    /** Decodes everything written so far; a decoding failure is emitted as 'error' synchronously. */
    execute(): void;
    read(): HpackDecodedField | null;
    updateTableSize(size: number): void;
    on(event: 'error', listener: (err: Error) => void): this;
  }

  export interface HpackCompressor {
    write(fields: HpackField[]): boolean;
    read(): Buffer | null;
    /** Resizes the table; emits the size update itself only when size >= the table's maxSize. */
    updateTableSize(size: number): void;
  }

  const hpack: {
    decompressor: { create(options: HpackOptions): HpackDecompressor };
    compressor: { create(options: HpackOptions): HpackCompressor };
  };
  export default hpack;
}
