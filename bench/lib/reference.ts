// The reference runtime: containerd 2.1.5 and runc 1.3.6 as ../shared/containerd-2.1/ holds them (a tarball and a
// README whose table gives each binary's sha256). The bench unpacks the tarball into a directory of its own and
// refuses binaries whose digests differ from the README's: no network, and no binary the README does not vouch for.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';

/** Where a checkout finds the reference by default: beside the repository, as the machines lay it out. */
export const DEFAULT_REFERENCE_DIR = fileURLToPath(new URL('../../../../shared/containerd-2.1/', import.meta.url));

export const REFERENCE_BINARIES = ['bin/containerd', 'bin/containerd-shim-runc-v2', 'bin/runc'] as const;

export interface Reference {
  /** The unpacked tree: `bin/` goes first in containerd's PATH so it finds its own shim. */
  dir: string;
  containerd: string;
  runc: string;
  /** The digests checked, by binary. */
  sha256: Record<string, string>;
}

/** The README's table rows `| bin/x | ... | <sha256> |`, by binary. Pure. */
export function parseDigestTable(readme: string): Record<string, string> {
  const digests: Record<string, string> = {};
  for (const m of readme.matchAll(/^\|\s*(bin\/[\w.-]+)\s*\|.*\|\s*([0-9a-f]{64})\s*\|\s*$/gm)) digests[m[1]!] = m[2]!;
  return digests;
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Unpacks the reference's tarball from `source` into `into` and checks every binary against the README. */
export async function unpackReference(source: string, into: string): Promise<Reference> {
  const readme = await readFile(join(source, 'README.md'), 'utf8').catch(() => {
    throw new Error(`no README.md in ${source}: pass the containerd 2.1 reference directory with --reference DIR`);
  });
  const expected = parseDigestTable(readme);
  const tarballs = (await readdir(source)).filter((f) => f.endsWith('.tar.gz'));
  if (tarballs.length !== 1) throw new Error(`${source} should hold one .tar.gz, it holds ${tarballs.length}`);
  await mkdir(into, { recursive: true });
  await execa('tar', ['-xzf', join(source, tarballs[0]!), '-C', into]);
  const sha256: Record<string, string> = {};
  for (const bin of REFERENCE_BINARIES) {
    const want = expected[bin];
    if (!want) throw new Error(`${source}/README.md gives no sha256 for ${bin}`);
    const got = await sha256File(join(into, bin));
    if (got !== want) throw new Error(`${bin} from ${tarballs[0]} has sha256 ${got}, the README says ${want}`);
    sha256[bin] = got;
  }
  return { dir: into, containerd: join(into, 'bin/containerd'), runc: join(into, 'bin/runc'), sha256 };
}
