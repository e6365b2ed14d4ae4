// Typed errors thrown by domain code. Each carries the gRPC status code it maps to, so domain
// modules stay free of gRPC while the server edge answers with a precise code.
import { status } from '@grpc/grpc-js';

export class CriError extends Error {
  constructor(readonly code: status, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class NotFound extends CriError {
  constructor(message: string, options?: { cause?: unknown }) { super(status.NOT_FOUND, message, options); }
}
export class InvalidArgument extends CriError {
  constructor(message: string, options?: { cause?: unknown }) { super(status.INVALID_ARGUMENT, message, options); }
}
export class AlreadyExists extends CriError {
  constructor(message: string, options?: { cause?: unknown }) { super(status.ALREADY_EXISTS, message, options); }
}
export class FailedPrecondition extends CriError {
  constructor(message: string, options?: { cause?: unknown }) { super(status.FAILED_PRECONDITION, message, options); }
}
export class Unimplemented extends CriError {
  constructor(message: string) { super(status.UNIMPLEMENTED, message); }
}
export class DeadlineExceeded extends CriError {
  constructor(message: string, options?: { cause?: unknown }) { super(status.DEADLINE_EXCEEDED, message, options); }
}
export class Unavailable extends CriError {
  constructor(message: string, options?: { cause?: unknown }) { super(status.UNAVAILABLE, message, options); }
}
export class PermissionDenied extends CriError {
  constructor(message: string, options?: { cause?: unknown }) { super(status.PERMISSION_DENIED, message, options); }
}
export class ResourceExhausted extends CriError {
  constructor(message: string, options?: { cause?: unknown }) { super(status.RESOURCE_EXHAUSTED, message, options); }
}
export class Internal extends CriError {
  constructor(message: string, options?: { cause?: unknown }) { super(status.INTERNAL, message, options); }
}

/** The gRPC status for anything thrown by a handler: typed errors keep their code, the rest is INTERNAL. */
export function toGrpcError(err: unknown): { code: status; details: string } {
  if (err instanceof CriError) return { code: err.code, details: err.message };
  const message = err instanceof Error ? err.message : String(err);
  return { code: status.INTERNAL, details: `internal error: ${message}` };
}
