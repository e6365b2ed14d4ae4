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

let loaded: protoLoader.PackageDefinition | undefined;

function definition(): protoLoader.PackageDefinition {
  return (loaded ??= protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS));
}

export function loadCri(): ProtoGrpcType['runtime']['v1'] {
  return (grpc.loadPackageDefinition(definition()) as unknown as ProtoGrpcType).runtime.v1;
}

/**
 * The numbers of a CRI enum's names as the loaded proto declares them (`Signal` for runtime.v1.Signal): the
 * wire decoder hands enums over by name, and the names of some change between cri-api versions.
 */
export function criEnumNumbers(name: string): ReadonlyMap<string, number> {
  const found = definition()[`runtime.v1.${name}`] as protoLoader.EnumTypeDefinition | undefined;
  if (found?.format !== 'Protocol Buffer 3 EnumDescriptorProto') throw new Error(`runtime.v1.${name} is no enum of the CRI proto`);
  const values = (found.type as { value: { name: string; number: number }[] }).value;
  return new Map(values.map((v) => [v.name, v.number]));
}
