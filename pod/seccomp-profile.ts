// Localhost seccomp profiles are files on the node: read here, before anything is made, so the pure spec
// builders get their text (and a missing or unreadable one refuses the request with nothing left behind).
import { readFile } from 'node:fs/promises';
import { InvalidArgument } from '../core/errors.js';
import { localhostSeccompRef } from '../oci/runtime/spec/index.js';

type SecurityContext = Parameters<typeof localhostSeccompRef>[0];

/** The Localhost profile the security context names (new field or legacy `localhost/<path>`), keyed by its ref. */
export async function readSeccompProfiles(sc: SecurityContext | undefined): Promise<Record<string, string> | undefined> {
  const ref = localhostSeccompRef(sc ?? null);
  if (!ref) return undefined;
  const text = await readFile(ref, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw new InvalidArgument(
      `seccomp profile ${ref} cannot be read: ${err.code === 'ENOENT' ? 'it was not found on this node' : err.message}`,
    );
  });
  return { [ref]: text };
}
