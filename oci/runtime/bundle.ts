// A container's bundle: the directory runc is given, holding the OCI spec (config.json) the container was made from.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Spec } from './spec/types.js';

/** The spec as written (its text, kept byte for byte in a checkpoint) and parsed; throws when it is gone or cut short. */
export async function readBundleSpec(bundle: string): Promise<{ text: string; spec: Spec }> {
  const text = await readFile(join(bundle, 'config.json'), 'utf8');
  return { text, spec: JSON.parse(text) as Spec };
}
