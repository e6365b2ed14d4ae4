// The one place minicri's error codes become gRPC statuses.
import { status } from '@grpc/grpc-js';
import { MinicriError, type ErrorCode } from '../core/errors.js';

const GRPC_STATUS: Record<ErrorCode, status> = {
  'not-found': status.NOT_FOUND,
  'invalid-argument': status.INVALID_ARGUMENT,
  'already-exists': status.ALREADY_EXISTS,
  'failed-precondition': status.FAILED_PRECONDITION,
  'unimplemented': status.UNIMPLEMENTED,
  'deadline-exceeded': status.DEADLINE_EXCEEDED,
  'cancelled': status.CANCELLED,
  'unavailable': status.UNAVAILABLE,
  'permission-denied': status.PERMISSION_DENIED,
  'resource-exhausted': status.RESOURCE_EXHAUSTED,
  'internal': status.INTERNAL,
};

/** The gRPC status for anything thrown by a handler: typed errors keep their code, the rest is INTERNAL. */
export function toGrpcError(err: unknown): { code: status; details: string } {
  if (err instanceof MinicriError) return { code: GRPC_STATUS[err.code], details: err.message };
  const message = err instanceof Error ? err.message : String(err);
  return { code: status.INTERNAL, details: `internal error: ${message}` };
}
