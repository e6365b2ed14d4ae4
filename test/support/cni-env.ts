// Test fixture for real CNI runs: a private conf dir, cache dir and host-local data dir, a bridge
// network on 10.233.<n>.0/24 with no route out, and a teardown that removes everything the test
// made (pod netns, the bridge, iptables chains portmap added, temp dirs).
import { mkdtemp, readdir, readFile, rm, stat, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { createPodNetns, removePodNetns, type PodNetns } from '../../netns/netns.js';

/** The Debian CNI plugins plus our test plugins. */
export const SYSTEM_CNI_BIN = '/usr/lib/cni';
export const TEST_PLUGIN_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../test/support/cni-plugins');

export interface TestNet {
  n: number;
  root: string;
  confDir: string;
  cacheDir: string;
  dataDir: string;
  recordDir: string;
  binDirs: string[];
  subnet: string;
  bridge: string;
  networkName: string;
  /** Writes `<confDir>/<file>` with a conflist of bridge + host-local (plus `extra` plugins after it). */
  writeBridgeConf(opts?: { file?: string; extra?: Record<string, unknown>[]; cniVersion?: string }): Promise<string>;
  /** IPs host-local currently holds for the network. */
  allocatedIps(): Promise<string[]>;
  /** Pod netns removed at cleanup if the test did not. */
  podNetns(name: string): Promise<PodNetns>;
  cleanup(): Promise<void>;
}

export async function makeTestNet(n: number): Promise<TestNet> {
  const root = await mkdtemp(path.join(tmpdir(), `mcnt-${n}-`));
  const confDir = path.join(root, 'net.d');
  const cacheDir = path.join(root, 'cache');
  const dataDir = path.join(root, 'ipam');
  const recordDir = path.join(root, 'record');
  await mkdir(recordDir);
  const subnet = `10.233.${n}.0/24`;
  const bridge = `mcnt-br${n}`;
  const networkName = `mcnt-net${n}`;
  const netnses: PodNetns[] = [];
  const natBefore = await natChains();

  return {
    n,
    root,
    confDir,
    cacheDir,
    dataDir,
    recordDir,
    binDirs: [SYSTEM_CNI_BIN, TEST_PLUGIN_DIR],
    subnet,
    bridge,
    networkName,
    async writeBridgeConf(opts = {}) {
      await mkdir(confDir, { recursive: true });
      const file = path.join(confDir, opts.file ?? '10-mcnt.conflist');
      const conf = {
        cniVersion: opts.cniVersion ?? '1.0.0',
        name: networkName,
        plugins: [
          {
            type: 'bridge',
            bridge,
            // No gateway on the host and no routes: pods only reach each other over the bridge,
            // and the host's ip_forward is left alone.
            isGateway: false,
            ipMasq: false,
            ipam: { type: 'host-local', ranges: [[{ subnet }]], dataDir },
          },
          ...(opts.extra ?? []),
        ],
      };
      await writeFile(file, JSON.stringify(conf));
      return file;
    },
    async allocatedIps() {
      try {
        const names = await readdir(path.join(dataDir, networkName));
        return names.filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f)).sort();
      } catch {
        return [];
      }
    },
    async podNetns(name) {
      const ns = await createPodNetns(name);
      netnses.push(ns);
      return ns;
    },
    async cleanup() {
      for (const ns of netnses) await removePodNetns(ns).catch(() => {});
      await execa('ip', ['link', 'del', bridge], { reject: false });
      // Chains portmap created during the test (per-pod ones are gone after DEL; shared ones it made on first use).
      const added = (await natChains()).filter((c) => !natBefore.includes(c));
      await removeNatChains(added);
      await rm(root, { recursive: true, force: true });
    },
  };
}

async function natChains(): Promise<string[]> {
  const out = await execa('iptables', ['-w', '-t', 'nat', '-S'], { reject: false });
  return String(out.stdout)
    .split('\n')
    .filter((l) => l.startsWith('-N '))
    .map((l) => l.slice(3).trim());
}

/** Deletes the jump rules into the chains, then flushes and deletes the chains. */
async function removeNatChains(chains: string[]): Promise<void> {
  if (chains.length === 0) return;
  const rules = String((await execa('iptables', ['-w', '-t', 'nat', '-S'], { reject: false })).stdout).split('\n');
  for (const rule of rules) {
    const m = /^-A (\S+) (.*)$/.exec(rule);
    if (m && !chains.includes(m[1]!) && chains.some((c) => new RegExp(`-j ${c}(\\s|$)`).test(m[2]!))) {
      await execa('sh', ['-c', `iptables -w -t nat -D ${m[1]} ${m[2]}`], { reject: false });
    }
  }
  for (const c of chains) await execa('iptables', ['-w', '-t', 'nat', '-F', c], { reject: false });
  for (const c of chains) await execa('iptables', ['-w', '-t', 'nat', '-X', c], { reject: false });
}

/** Interfaces currently enslaved to `bridge` (the host ends of pod veths). */
export async function bridgePorts(bridge: string): Promise<string[]> {
  const out = await execa('ip', ['-o', 'link', 'show', 'master', bridge], { reject: false });
  return String(out.stdout)
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => l.split(':')[1]!.trim().split('@')[0]!);
}

/** Calls recorded by the mcnt-record test plugin: env and parsed stdin, oldest first. */
export async function recordedCalls(recordDir: string): Promise<{ env: Record<string, string>; stdin: Record<string, unknown>; file: string; mtime: number }[]> {
  const files = (await readdir(recordDir)).filter((f) => f.startsWith('call.'));
  const calls = [];
  for (const f of files) {
    const mtime = (await stat(path.join(recordDir, f))).mtimeMs;
    const text = await readFile(path.join(recordDir, f), 'utf8');
    const [envPart, stdinPart] = text.split('\n---\n');
    const env = Object.fromEntries(
      envPart!
        .split('\n')
        .filter((l) => l.includes('='))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    calls.push({ env, stdin: JSON.parse(stdinPart!) as Record<string, unknown>, file: f, mtime });
  }
  return calls.sort((a, b) => a.mtime - b.mtime);
}

/** Runs `cmd` inside the pinned netns. */
export async function inNetns(nsPath: string, cmd: string[]): Promise<string> {
  return String((await execa('nsenter', [`--net=${nsPath}`, '--', ...cmd])).stdout);
}

export { waitFor } from './wait.js';
