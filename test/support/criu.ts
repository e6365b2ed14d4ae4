// Which CRIU the checkpoint tests run: one that passes `criu check` on this kernel. In order: MINICRI_TEST_CRIU (a
// path), the one ../shared/criu/build.sh installs (CRIU 4.2 under /usr/local/lib/criu-4.2), the system's `criu`.
// A CRIU that was asked for (the variable, or a build.sh binary present) must work: the tests fail rather than take
// their "CRIU cannot work here" branch, which is left only to a node with nothing but a system CRIU that fails.
import { execa } from 'execa';
import { isExecutableFile, resolveExecutable } from '../../core/executables.js';

export const BUILT_CRIU = '/usr/local/lib/criu-4.2/sbin/criu';

export type TestCriu =
  | { works: true; path: string; version: string }
  | { works: false; path: string; why: string };

let found: Promise<TestCriu> | undefined;

/** The CRIU to test with (looked up once per process). Throws when a CRIU that was asked for fails `criu check`. */
export function testCriu(): Promise<TestCriu> {
  found ??= findCriu();
  return found;
}

async function findCriu(): Promise<TestCriu> {
  const asked = process.env.MINICRI_TEST_CRIU || (isExecutableFile(BUILT_CRIU) ? BUILT_CRIU : undefined);
  const path = asked ?? resolveExecutable('criu') ?? 'criu';
  const check = await execa(path, ['check'], { reject: false });
  const why = `${check.stderr}${check.stdout}`.trim();
  if (check.exitCode !== 0) {
    if (asked) throw new Error(`the configured CRIU ${asked} fails \`criu check\` on this kernel: ${why.split('\n').slice(-3).join(' | ')}`);
    return { works: false, path, why: why.split('\n')[0] ?? '' };
  }
  const version = (await execa(path, ['--version'], { reject: false })).stdout.split('\n').find((l) => /^Version/.test(l)) ?? '?';
  return { works: true, path, version: version.replace(/^Version:\s*/, '') };
}

/** One line naming the CRIU a test ran with, for its diagnostics. */
export function describeCriu(c: TestCriu): string {
  return c.works ? `CRIU ${c.version} (${c.path}) passes \`criu check\`` : `CRIU ${c.path} fails \`criu check\`: ${c.why}`;
}
