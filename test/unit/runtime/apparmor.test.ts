import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { execa } from 'execa';
import { findExecutable } from '../../../core/executables.js';
import { createLogger } from '../../../core/log.js';
import {
  apparmorStatus, parseLoadedProfiles, planApparmor, profileFile, setUpApparmor, type ApparmorNode,
} from '../../../oci/runtime/apparmor/loader.js';
import { MINICRI_PROFILE, MINICRI_PROFILE_VERSION, minicriProfileText } from '../../../oci/runtime/apparmor/profile.js';

const dirs: string[] = [];
after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'minicri-apparmor-'));
  dirs.push(dir);
  return dir;
}

/** setup.sh installs the apparmor package on every node: its parser must be there, AppArmor in the kernel or not. */
const PARSER = findExecutable(['/usr/sbin/apparmor_parser', '/sbin/apparmor_parser']);

describe('minicri-default profile', () => {
  it('compiles with apparmor_parser without a kernel', async () => {
    assert.ok(PARSER, 'apparmor_parser is not installed (scripts/setup.sh installs the apparmor package)');
    const file = join(await tempDir(), MINICRI_PROFILE);
    await writeFile(file, minicriProfileText());
    // -Q: compile only, nothing is loaded; -K: no cache read or written.
    const r = await execa(PARSER, ['--skip-kernel-load', '-K', file], { reject: false, all: true });
    assert.equal(r.exitCode, 0, r.all);
    // The parser rejects a broken profile the same way: the check above can fail.
    await writeFile(file, minicriProfileText().replace('  file,', '  file'));
    assert.notEqual((await execa(PARSER, ['--skip-kernel-load', '-K', file], { reject: false })).exitCode, 0);
  });

  it('is named minicri-default, pins ABI 3.0, carries its version and denies what a runtime default denies', () => {
    const text = minicriProfileText();
    assert.match(text, new RegExp(`^# minicri-default version ${MINICRI_PROFILE_VERSION}:`));
    assert.match(text, /^abi <abi\/3\.0>,$/m);
    assert.match(text, /^include <tunables\/global>$/m);
    assert.match(text, /^profile minicri-default flags=\(attach_disconnected,mediate_deleted\) \{$/m);
    for (const rule of [
      'audit deny mount,', 'audit deny umount /proc{,/**},', 'audit deny umount /sys{,/**},', 'deny @{PROC}/* w,', 'deny @{PROC}/[^1-9/]*/** w,', 'deny @{PROC}/sysrq-trigger rwklx,',
      'deny @{PROC}/kcore rwklx,', 'deny /sys/firmware/** rwklx,', 'deny /sys/kernel/security/** rwklx,',
      'ptrace (trace, read, tracedby, readby) peer=minicri-default,', 'signal (send, receive) peer=minicri-default,',
      'signal (receive) peer=unconfined,',
    ]) assert.ok(text.includes(`  ${rule}\n`), rule);
    // An unmount under /proc or /sys would take runc's masks away: denied there. The one allow rule keeps the
    // mount class in the compiled policy, without which the kernel mediates no mount at all.
    const rules = text.split('\n').filter((l) => /\bu?mount\b/.test(l) && !l.trim().startsWith('#'));
    assert.deepEqual(rules, ['  umount,', '  audit deny mount,', '  audit deny umount /proc{,/**},', '  audit deny umount /sys{,/**},']);
  });
});

describe('loaded profiles', () => {
  it('reads the kernel\'s list: a name and its mode a line', () => {
    const loaded = parseLoadedProfiles('minicri-default (enforce)\n/usr/bin/man (complain)\nwith space (enforce)\nnvidia//child (kill)\n\n');
    assert.deepEqual([...loaded], [
      ['minicri-default', 'enforce'], ['/usr/bin/man', 'complain'], ['with space', 'enforce'], ['nvidia//child', 'kill'],
    ]);
    assert.equal(parseLoadedProfiles('').size, 0);
  });
});

describe('planApparmor', () => {
  const text = minicriProfileText();
  const node = (over: Partial<ApparmorNode> = {}): ApparmorNode => ({ enabled: true, parser: '/usr/sbin/apparmor_parser', loaded: new Map(), ...over });
  const listed = new Map([[MINICRI_PROFILE, 'enforce']]);

  it('does nothing without AppArmor', () => {
    assert.deepEqual(planApparmor(MINICRI_PROFILE, node({ enabled: false, loaded: listed })), { action: 'none' });
  });
  it('loads minicri\'s profile when the kernel does not hold it', () => {
    assert.deepEqual(planApparmor(MINICRI_PROFILE, node()), { action: 'load', profile: MINICRI_PROFILE, text, parser: '/usr/sbin/apparmor_parser' });
  });
  it('keeps the loaded profile when this boot\'s file holds today\'s text', () => {
    assert.deepEqual(planApparmor(MINICRI_PROFILE, node({ loaded: listed, written: text })), { action: 'use', profile: MINICRI_PROFILE });
  });
  it('reloads when minicri ships another version, or the kernel holds one it did not load', () => {
    const older = text.replace(`version ${MINICRI_PROFILE_VERSION}`, `version ${MINICRI_PROFILE_VERSION - 1}`);
    assert.equal(planApparmor(MINICRI_PROFILE, node({ loaded: listed, written: older })).action, 'load');
    assert.equal(planApparmor(MINICRI_PROFILE, node({ loaded: listed })).action, 'load');
  });
  it('cannot load without apparmor_parser', () => {
    assert.deepEqual(planApparmor(MINICRI_PROFILE, node({ parser: undefined })), {
      action: 'missing', profile: MINICRI_PROFILE, problem: 'apparmor_parser was not found: install the apparmor package and restart minicri',
    });
  });
  it('uses an operator\'s profile as it is, never loading it', () => {
    assert.deepEqual(planApparmor('site-default', node({ loaded: new Map([['site-default', 'complain']]) })), { action: 'use', profile: 'site-default' });
    const missing = planApparmor('site-default', node({ loaded: listed }));
    assert.equal(missing.action, 'missing');
    assert.match(missing.action === 'missing' ? missing.problem : '', /^load it with "apparmor_parser -r <file>" \(the file that defines profile site-default\), or change the config key apparmor_profile$/);
  });
});

describe('setUpApparmor', () => {
  const log = createLogger('silent');

  /** A node whose kernel files are plain files and whose apparmor_parser is a script that lists what it loads. */
  async function fakeNode(enabled: string, parserExit = 0) {
    const dir = await tempDir();
    const paths = { enabled: join(dir, 'enabled'), profiles: join(dir, 'profiles') };
    await writeFile(paths.enabled, enabled);
    await writeFile(paths.profiles, 'other (enforce)\n');
    const parser = join(dir, 'apparmor_parser');
    const calls = join(dir, 'calls');
    await writeFile(parser, `#!/bin/sh\necho "$@" >> ${calls}\n${parserExit === 0
      ? `grep -q '^profile ${MINICRI_PROFILE} ' "$3" && echo '${MINICRI_PROFILE} (enforce)' >> ${paths.profiles}`
      : 'echo "AppArmor parser error: something" >&2'}\nexit ${parserExit}\n`, { mode: 0o755 });
    const stateDir = join(dir, 'state');
    const calledWith = () => readFile(calls, 'utf8').then((s) => s.trim().split('\n'), () => []);
    return { paths, parser, stateDir, calledWith, setUp: () => setUpApparmor({ profile: MINICRI_PROFILE, stateDir, log, paths, parser }) };
  }

  it('loads the profile once per boot and version, from a file under the state dir', async () => {
    const n = await fakeNode('Y\n');
    const first = await n.setUp();
    assert.deepEqual(first, { enabled: true, defaultProfile: MINICRI_PROFILE, loadedAtStart: true, defaultMissing: 'restart minicri to load it again' });
    assert.deepEqual(await n.calledWith(), [`-r -K ${profileFile(n.stateDir)}.next`]);
    assert.equal(await readFile(profileFile(n.stateDir), 'utf8'), minicriProfileText());
    // A restart finds it loaded, with this text: nothing to do.
    assert.equal((await n.setUp()).loadedAtStart, true);
    assert.equal((await n.calledWith()).length, 1);
  });

  it('says why when apparmor_parser fails, and leaves the file for the operator to try', async () => {
    const n = await fakeNode('Y\n', 1);
    const setup = await n.setUp();
    assert.equal(setup.loadedAtStart, false);
    assert.equal(setup.defaultMissing, `apparmor_parser -r ${profileFile(n.stateDir)}.next failed: AppArmor parser error: something`);
    await assert.rejects(readFile(profileFile(n.stateDir)), { code: 'ENOENT' });
  });

  it('says so when the state dir cannot take the file, rather than stopping the daemon', async () => {
    const n = await fakeNode('Y\n');
    await writeFile(n.stateDir, 'not a directory');
    const setup = await setUpApparmor({ profile: MINICRI_PROFILE, stateDir: n.stateDir, log, paths: n.paths, parser: n.parser });
    assert.equal(setup.loadedAtStart, false);
    assert.match(setup.defaultMissing, /^could not write .*minicri-default\.next: /);
    assert.deepEqual(await n.calledWith(), []);
  });

  it('does nothing on a node without AppArmor', async () => {
    const n = await fakeNode('N\n');
    assert.deepEqual(await n.setUp(), { enabled: false, defaultProfile: MINICRI_PROFILE, loadedAtStart: false, defaultMissing: 'AppArmor is not enabled on this node' });
    assert.deepEqual(await n.calledWith(), []);
  });
});

describe('apparmorStatus (verbose Status)', () => {
  const setup = { enabled: true, defaultProfile: MINICRI_PROFILE, loadedAtStart: true, defaultMissing: 'restart minicri to load it again' };
  it('says whether the default profile is loaded now, in which mode and version', () => {
    assert.deepEqual(apparmorStatus(setup, new Map([[MINICRI_PROFILE, 'enforce']])),
      { enabled: true, defaultProfile: MINICRI_PROFILE, loaded: true, mode: 'enforce', version: MINICRI_PROFILE_VERSION });
    assert.deepEqual(apparmorStatus(setup, new Map()),
      { enabled: true, defaultProfile: MINICRI_PROFILE, loaded: false, version: MINICRI_PROFILE_VERSION, problem: 'restart minicri to load it again' });
  });
  it('without AppArmor: not enabled, nothing loaded', () => {
    assert.deepEqual(apparmorStatus({ ...setup, enabled: false, loadedAtStart: false }, new Map()),
      { enabled: false, defaultProfile: MINICRI_PROFILE, loaded: false, version: MINICRI_PROFILE_VERSION });
  });
});
