// The CRI container log format, as written by conmon's k8s-file driver and read by kubelet:
//   <RFC3339Nano timestamp> <stdout|stderr> <tags> <content>\n
// tags is ':'-separated; its first tag is P (partial: the line continues in the next entry
// of the same stream) or F (full: this entry ends a line). Pure functions only.
import { InvalidArgument } from '../../core/errors.js';

export type LogStream = 'stdout' | 'stderr';

export interface CriLogEntry {
  /** The timestamp exactly as written (nanosecond precision survives here, not in `time`). */
  timestamp: string;
  time: Date;
  stream: LogStream;
  /** True for a P entry: the container's line continues in the next entry of this stream. */
  partial: boolean;
  content: string;
}

export interface CriLogLine {
  stream: LogStream;
  /** Time of the entry that completed the line. */
  time: Date;
  content: string;
  /** False when the log ended in the middle of a line (only P entries were seen). */
  complete: boolean;
}

// Date, time, optional fraction, then Z or a numeric offset (conmon writes +00:00).
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** Parse one log entry (without its trailing newline). Throws InvalidArgument on a malformed entry. */
export function parseCriLogEntry(line: string): CriLogEntry {
  const s1 = line.indexOf(' ');
  const s2 = s1 < 0 ? -1 : line.indexOf(' ', s1 + 1);
  const s3 = s2 < 0 ? -1 : line.indexOf(' ', s2 + 1);
  // An empty F entry ("... stdout F") has no space after the tag in some writers; accept both.
  const tagsEnd = s3 < 0 ? line.length : s3;
  if (s1 < 0 || s2 < 0) throw malformed(line, 'expected "<timestamp> <stream> <tags> <content>"');
  const timestamp = line.slice(0, s1);
  const stream = line.slice(s1 + 1, s2);
  const tags = line.slice(s2 + 1, tagsEnd).split(':');
  if (!TIMESTAMP.test(timestamp)) throw malformed(line, `bad timestamp "${timestamp}"`);
  const time = new Date(timestamp);
  if (Number.isNaN(time.getTime())) throw malformed(line, `bad timestamp "${timestamp}"`);
  if (stream !== 'stdout' && stream !== 'stderr') throw malformed(line, `bad stream "${stream}"`);
  if (tags[0] !== 'P' && tags[0] !== 'F') throw malformed(line, `bad tag "${tags[0]}", want P or F`);
  return { timestamp, time, stream, partial: tags[0] === 'P', content: s3 < 0 ? '' : line.slice(s3 + 1) };
}

/** Parse a whole log file's text. A trailing newline is expected; a torn last entry is rejected. */
export function parseCriLog(text: string): CriLogEntry[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines.map(parseCriLogEntry);
}

/** Join P…F runs into the container's original lines, per stream, in order of completion. */
export function joinCriLogEntries(entries: Iterable<CriLogEntry>): CriLogLine[] {
  const pending: Record<LogStream, string[]> = { stdout: [], stderr: [] };
  const out: CriLogLine[] = [];
  const lastTime: Partial<Record<LogStream, Date>> = {};
  for (const e of entries) {
    pending[e.stream].push(e.content);
    lastTime[e.stream] = e.time;
    if (!e.partial) {
      out.push({ stream: e.stream, time: e.time, content: pending[e.stream].join(''), complete: true });
      pending[e.stream] = [];
    }
  }
  for (const stream of ['stdout', 'stderr'] as const) {
    if (pending[stream].length > 0) {
      out.push({ stream, time: lastTime[stream]!, content: pending[stream].join(''), complete: false });
    }
  }
  return out;
}

/**
 * RFC 3339 timestamp with nanoseconds in UTC. `nanos` (0..999999999) replaces the sub-second part of
 * `time` when given, since a Date only holds milliseconds.
 */
export function formatRfc3339Nano(time: Date, nanos?: number): string {
  if (Number.isNaN(time.getTime())) throw new InvalidArgument('cannot format an invalid Date as a log timestamp');
  const ns = nanos ?? time.getUTCMilliseconds() * 1_000_000;
  if (!Number.isInteger(ns) || ns < 0 || ns > 999_999_999) throw new InvalidArgument(`nanoseconds ${ns} out of range 0..999999999`);
  return `${time.toISOString().slice(0, 19)}.${String(ns).padStart(9, '0')}Z`;
}

/** Format one entry, newline included. Content must not contain a newline: that would end the entry early. */
export function formatCriLogEntry(e: { time: Date; nanos?: number; stream: LogStream; partial: boolean; content: string }): string {
  if (e.content.includes('\n')) throw new InvalidArgument('CRI log entry content must not contain a newline: split it into lines first');
  return `${formatRfc3339Nano(e.time, e.nanos)} ${e.stream} ${e.partial ? 'P' : 'F'} ${e.content}\n`;
}

/**
 * Format text written by a container to one stream as CRI log entries, the way conmon does: every
 * newline-terminated line is an F entry, lines longer than `maxContentBytes` become P entries followed
 * by a final F, and trailing text without a newline is left as a P entry (more may follow).
 * Splitting is by UTF-8 bytes but never inside a character.
 */
export function formatCriLog(stream: LogStream, text: string, time: Date, maxContentBytes = 16 * 1024): string {
  if (!Number.isInteger(maxContentBytes) || maxContentBytes < 4) {
    throw new InvalidArgument(`maxContentBytes must be an integer >= 4, got ${maxContentBytes}`);
  }
  const lines = text.split('\n');
  const endsWithNewline = lines[lines.length - 1] === '';
  if (endsWithNewline) lines.pop();
  let out = '';
  lines.forEach((line, i) => {
    const chunks = splitUtf8(line, maxContentBytes);
    const lastLineIsTorn = i === lines.length - 1 && !endsWithNewline;
    chunks.forEach((chunk, j) => {
      const partial = j < chunks.length - 1 || lastLineIsTorn;
      out += formatCriLogEntry({ time, stream, partial, content: chunk });
    });
  });
  return out;
}

/** Split a string into pieces of at most maxBytes UTF-8 bytes without cutting a code point. */
function splitUtf8(s: string, maxBytes: number): string[] {
  if (Buffer.byteLength(s) <= maxBytes) return [s];
  const pieces: string[] = [];
  let current = '';
  let size = 0;
  for (const ch of s) {
    const n = Buffer.byteLength(ch);
    if (size + n > maxBytes) {
      pieces.push(current);
      current = '';
      size = 0;
    }
    current += ch;
    size += n;
  }
  pieces.push(current);
  return pieces;
}

function malformed(line: string, why: string): InvalidArgument {
  const shown = line.length > 80 ? `${line.slice(0, 80)}…` : line;
  return new InvalidArgument(`malformed CRI log entry "${shown}": ${why}`);
}
