// One pino logger for the daemon, JSON on stderr. Operations take a child carrying their ids.
import { pino, type Logger, type Level } from 'pino';

export type { Logger };

export function createLogger(level: Level | 'silent' = 'info'): Logger {
  return pino({ name: 'minicri', level, base: { pid: process.pid } }, pino.destination({ fd: 2, sync: false }));
}

/** A logger that drops everything: for domain modules used in tests. */
export const silentLogger: Logger = pino({ level: 'silent' });
