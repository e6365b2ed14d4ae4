// Loads the CRI wire contract once. Field names stay as in the .proto (snake_case), 64-bit integers
// arrive as strings (nanosecond timestamps overflow doubles) and enums as their names.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { ProtoGrpcType } from '../gen/api.js';

export const PROTO_PATH = fileURLToPath(new URL('../../proto/runtime/v1/api.proto', import.meta.url));

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

export function loadCri(): ProtoGrpcType['runtime']['v1'] {
  const definition = protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS);
  return (grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType).runtime.v1;
}
