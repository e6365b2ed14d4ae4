// Makes the default AppArmor profile available at start: minicri's own is written under the state dir and
// loaded with apparmor_parser when the kernel does not have this version of it yet; a profile the operator
// named instead is only looked for. The decision is a pure function of what the node shows.
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { findExecutable, resolveExecutable } from '../../../core/executables.js';
import type { Logger } from '../../../core/log.js';
import { run } from '../../../core/spawn.js';
import { MINICRI_PROFILE, MINICRI_PROFILE_VERSION, minicriProfileText } from './profile.js';

/** Where the kernel says whether AppArmor is on and which profiles it holds. */
export interface ApparmorPaths {
  enabled: string;
  profiles: string;
}

export const KERNEL_APPARMOR: ApparmorPaths = {
  enabled: '/sys/module/apparmor/parameters/enabled',
  profiles: '/sys/kernel/security/apparmor/profiles',
};

/**
 * The kernel's list of loaded profiles (`name (mode)` a line, mode enforce, complain, kill...): names to
 * modes. A name may hold spaces, so the mode is the last parenthesis.
 */
export function parseLoadedProfiles(text: string): Map<string, string> {
  const loaded = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^(.+) \(([^()]*)\)$/.exec(line.trim());
    if (m) loaded.set(m[1]!, m[2]!);
  }
  return loaded;
}

/** Profiles the kernel holds now; none when AppArmor's interface is not there (securityfs not mounted). */
export async function loadedProfiles(paths: ApparmorPaths = KERNEL_APPARMOR): Promise<Map<string, string>> {
  return parseLoadedProfiles(await readFile(paths.profiles, 'utf8').catch(() => ''));
}

/** What the node shows, as the plan reads it. */
export interface ApparmorNode {
  /** The kernel enforces AppArmor (the module's `enabled` parameter is Y). */
  enabled: boolean;
  /** apparmor_parser's path, when installed. */
  parser?: string;
  loaded: ReadonlyMap<string, string>;
  /** The profile file minicri wrote and loaded earlier this boot (the state dir is gone after a reboot, as is the kernel's policy). */
  written?: string;
}

export type ApparmorPlan =
  /** No AppArmor on this node: nothing to load, no profile applied. */
  | { action: 'none' }
  /** The default profile is loaded as it should be. */
  | { action: 'use'; profile: string }
  /** Write minicri's profile and (re)load it. */
  | { action: 'load'; profile: string; text: string; parser: string }
  /** The default profile is not there and minicri cannot load it: why, and what to do. */
  | { action: 'missing'; profile: string; problem: string };

/**
 * What to do about the default profile `profile` (config key apparmor_profile). minicri's own is loaded
 * unless the kernel lists it and the file this boot's load came from holds today's text: the kernel keeps
 * no source to compare with, and its policy and the state dir both last exactly until the next reboot.
 */
export function planApparmor(profile: string, node: ApparmorNode, text = minicriProfileText()): ApparmorPlan {
  if (!node.enabled) return { action: 'none' };
  if (profile !== MINICRI_PROFILE) {
    return node.loaded.has(profile)
      ? { action: 'use', profile }
      : { action: 'missing', profile, problem: notLoadedHint(profile) };
  }
  if (node.loaded.has(profile) && node.written === text) return { action: 'use', profile };
  if (!node.parser) {
    return { action: 'missing', profile, problem: 'apparmor_parser was not found: install the apparmor package and restart minicri' };
  }
  return { action: 'load', profile, text, parser: node.parser };
}

/** What to do when `profile`, the default, is not loaded (from the operator, or unloaded after start). */
export function notLoadedHint(profile: string): string {
  return profile === MINICRI_PROFILE
    ? 'restart minicri to load it again'
    : `load it with "apparmor_parser -r <file>" (the file that defines profile ${profile}), or change the config key apparmor_profile`;
}

/** AppArmor as the daemon found and left it at start. */
export interface ApparmorSetup {
  enabled: boolean;
  /** The profile RuntimeDefault maps to. */
  defaultProfile: string;
  /** What a pod that needs the default profile is told when the kernel does not list it: why, and what to do. */
  defaultMissing: string;
  /** Whether the default profile was loaded once start was done. */
  loadedAtStart: boolean;
}

/** The file minicri loads its profile from. */
export function profileFile(stateDir: string): string {
  return join(stateDir, 'apparmor', MINICRI_PROFILE);
}

function findParser(): string | undefined {
  // The daemon's PATH may lack the sbin directories where Debian installs it.
  return resolveExecutable('apparmor_parser') ?? findExecutable(['/usr/sbin/apparmor_parser', '/sbin/apparmor_parser']);
}

/** Reads the node, carries out the plan and says how it went; never throws (pods then get the reason). */
export async function setUpApparmor(
  opts: { profile: string; stateDir: string; log: Logger; paths?: ApparmorPaths; parser?: string },
): Promise<ApparmorSetup> {
  const paths = opts.paths ?? KERNEL_APPARMOR;
  const file = profileFile(opts.stateDir);
  const [enabled, loaded, written] = await Promise.all([
    readFile(paths.enabled, 'utf8').then((s) => s.trim() === 'Y', () => false),
    loadedProfiles(paths),
    readFile(file, 'utf8').catch(() => undefined),
  ]);
  const plan = planApparmor(opts.profile, { enabled, parser: opts.parser ?? findParser(), loaded, written });
  const setup = (defaultMissing: string, loadedAtStart: boolean): ApparmorSetup =>
    ({ enabled, defaultProfile: opts.profile, defaultMissing, loadedAtStart });
  switch (plan.action) {
    case 'none':
      return setup('AppArmor is not enabled on this node', false);
    case 'use':
      opts.log.info({ profile: plan.profile }, 'AppArmor default profile is loaded');
      return setup(notLoadedHint(plan.profile), true);
    case 'missing':
      opts.log.error(
        { profile: plan.profile },
        `AppArmor default profile "${plan.profile}" is not loaded: ${plan.problem}; ` +
          'pods that ask for RuntimeDefault (or name no profile) will be refused',
      );
      return setup(plan.problem, false);
    case 'load': {
      const problem = await loadProfile(file, plan.text, plan.parser, paths)
        .catch((err: Error) => `could not write ${file}.next: ${err.message}`);
      if (problem) {
        opts.log.error(
          { profile: plan.profile, file },
          `AppArmor default profile "${plan.profile}" could not be loaded: ${problem}; ` +
            'pods that ask for RuntimeDefault (or name no profile) will be refused',
        );
        return setup(problem, false);
      }
      opts.log.info({ profile: plan.profile, file }, 'AppArmor default profile loaded');
      return setup(notLoadedHint(plan.profile), true);
    }
  }
}

/** Writes the profile and replaces the kernel's copy; the problem when it did not end up loaded. */
async function loadProfile(file: string, text: string, parser: string, paths: ApparmorPaths): Promise<string | undefined> {
  await mkdir(join(file, '..'), { recursive: true, mode: 0o700 });
  // The file is the record of what the kernel got: it is only in place once the load succeeded.
  const next = `${file}.next`;
  await writeFile(next, text, { mode: 0o600 });
  // -r replaces a loaded profile of that name (running containers move to the new text); -K: no cache, so
  // nothing compiled earlier stands in for this text.
  const r = await run(parser, ['-r', '-K', next]).catch((err: Error) => err);
  if (r instanceof Error || r.code !== 0) {
    const said = r instanceof Error
      ? r.message
      : `${r.stderr}${r.stdout}`.trim().split('\n').slice(0, 3).join(' / ') || `status ${r.code ?? r.signal}`;
    return `apparmor_parser -r ${next} failed: ${said}`;
  }
  await rename(next, file);
  if (!(await loadedProfiles(paths)).has(MINICRI_PROFILE)) {
    return `apparmor_parser loaded ${file} but ${paths.profiles} does not list ${MINICRI_PROFILE}`;
  }
  return undefined;
}

/** What verbose Status says about AppArmor; `loaded` are the profiles the kernel holds now. */
export function apparmorStatus(setup: ApparmorSetup, loaded: ReadonlyMap<string, string>) {
  const isLoaded = setup.enabled && loaded.has(setup.defaultProfile);
  return {
    enabled: setup.enabled,
    defaultProfile: setup.defaultProfile,
    loaded: isLoaded,
    ...(isLoaded ? { mode: loaded.get(setup.defaultProfile) } : {}),
    ...(setup.defaultProfile === MINICRI_PROFILE ? { version: MINICRI_PROFILE_VERSION } : {}),
    ...(setup.enabled && !isLoaded ? { problem: setup.defaultMissing } : {}),
  };
}
