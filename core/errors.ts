// Typed errors thrown anywhere below the gRPC edge. Each carries a code of minicri's own; only the edge
// (server/grpc-status.ts) knows which gRPC status a code becomes, so nothing below it depends on gRPC.

/** What kind of failure an error is, as the caller needs to know it. */
export type ErrorCode =
  | 'not-found'
  | 'invalid-argument'
  | 'already-exists'
  | 'failed-precondition'
  | 'unimplemented'
  | 'deadline-exceeded'
  | 'cancelled'
  | 'unavailable'
  | 'permission-denied'
  | 'resource-exhausted'
  | 'internal';

export class MinicriError extends Error {
  constructor(readonly code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

type Options = { cause?: unknown };

export class NotFound extends MinicriError {
  constructor(message: string, options?: Options) { super('not-found', message, options); }
}
export class InvalidArgument extends MinicriError {
  constructor(message: string, options?: Options) { super('invalid-argument', message, options); }
}
export class AlreadyExists extends MinicriError {
  constructor(message: string, options?: Options) { super('already-exists', message, options); }
}
export class FailedPrecondition extends MinicriError {
  constructor(message: string, options?: Options) { super('failed-precondition', message, options); }
}
export class Unimplemented extends MinicriError {
  constructor(message: string) { super('unimplemented', message); }
}
export class DeadlineExceeded extends MinicriError {
  constructor(message: string, options?: Options) { super('deadline-exceeded', message, options); }
}
/** The client gave up on the call before its deadline. */
export class Cancelled extends MinicriError {
  constructor(message: string, options?: Options) { super('cancelled', message, options); }
}
export class Unavailable extends MinicriError {
  constructor(message: string, options?: Options) { super('unavailable', message, options); }
}
export class PermissionDenied extends MinicriError {
  constructor(message: string, options?: Options) { super('permission-denied', message, options); }
}
export class ResourceExhausted extends MinicriError {
  constructor(message: string, options?: Options) { super('resource-exhausted', message, options); }
}
/** A bug of ours, or a failure the caller can do nothing about. */
export class Internal extends MinicriError {
  constructor(message: string, options?: Options) { super('internal', message, options); }
}

/** The first error in `err`'s cause chain (itself first) that `matches`: a system error under wrappers, say. */
export function causeWhere(err: unknown, matches: (e: NodeJS.ErrnoException) => boolean): NodeJS.ErrnoException | undefined {
  for (let e = err as (NodeJS.ErrnoException & { cause?: unknown }) | undefined; e; e = e.cause as typeof e) {
    if (matches(e)) return e;
  }
  return undefined;
}

/**
 * A file-system failure on a path the caller chose (a checkpoint's output), as an error they can act on: a full
 * disk RESOURCE_EXHAUSTED, no permission or a read-only file system FAILED_PRECONDITION, a name already taken
 * INVALID_ARGUMENT. Our own errors, and any other, are left as they are. Pure.
 */
export function callerPathError(err: unknown, path: string): unknown {
  if (err instanceof MinicriError) return err;
  const e = causeWhere(err, (x) => typeof x.code === 'string');
  switch (e?.code) {
    case 'ENOSPC':
    case 'EDQUOT':
      return new ResourceExhausted(`${path}: its file system is full (${e.code}): free space there or write elsewhere`, { cause: err });
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return new FailedPrecondition(`${path}: minicri may not write there (${e.code}): give a writable directory`, { cause: err });
    case 'EEXIST':
      return new InvalidArgument(`${path}: ${e.path ?? 'a name'} already exists: give a new path`, { cause: err });
    default:
      return err;
  }
}
