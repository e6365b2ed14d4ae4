// Choosing the one manifest of an image index that this host runs, with containerd-like variant rules:
// an amd64 host at level vN runs v1..vN images, arm64 treats "" and "v8" alike, arm vN runs v5..vN.
import type { Platform } from './types.js';

/** Node's process.arch as OCI names it (Go's GOARCH); Node's ppc64 and mips64el are the little-endian ones on Linux. */
const NODE_ARCH: Record<string, string> = {
  x64: 'amd64', ia32: '386', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64',
  loong64: 'loong64', mips64el: 'mips64le', mipsel: 'mipsle',
};

/**
 * The platform of this host: `arch` as Node names it, and for 32-bit arm the ARM version Node was built for
 * (process.config's arm_version), as the variant ("v7"); arm64 is "v8". Pure.
 */
export function hostPlatform(
  arch: string = process.arch, armVersion: unknown = (process.config.variables as Record<string, unknown>).arm_version,
): Platform {
  const architecture = NODE_ARCH[arch] ?? arch;
  if (architecture === 'arm64') return { os: 'linux', architecture, variant: 'v8' };
  if (architecture === 'arm') {
    const v = /^\d+$/.test(String(armVersion ?? '')) ? `v${String(armVersion)}` : 'v7';
    return { os: 'linux', architecture, variant: v };
  }
  return { os: 'linux', architecture };
}

export const HOST_PLATFORM: Platform = hostPlatform();

/**
 * Whether an image whose config says `image` runs on `host`: same OS and architecture, and for arm a version
 * the host's covers. An image that names no architecture is taken as it is. Pure.
 */
export function runsOn(image: Platform, host: Platform = HOST_PLATFORM): boolean {
  if (!image.architecture) return true;
  const [want, have] = [normalizePlatform(host), normalizePlatform({ ...image, os: image.os || host.os })];
  if (have.os !== want.os || have.architecture !== want.architecture) return false;
  // amd64 levels say what the image was tuned for, not what it needs of every CPU: only arm versions are held.
  return have.architecture !== 'arm' || selectPlatform([{ platform: have }], want) === 0;
}

const ARCH_ALIASES: Record<string, string> = { x86_64: 'amd64', 'x86-64': 'amd64', aarch64: 'arm64', armhf: 'arm', armel: 'arm' };
const DEFAULT_VARIANT: Record<string, string> = { amd64: 'v1', arm64: 'v8', arm: 'v7' };

export function normalizePlatform(p: Platform): Required<Platform> {
  const architecture = ARCH_ALIASES[p.architecture] ?? p.architecture;
  const variant = p.variant || DEFAULT_VARIANT[architecture] || '';
  return { os: p.os.toLowerCase(), architecture, variant };
}

/** Variants a host of this architecture+variant runs, best first. */
function compatibleVariants(architecture: string, variant: string): string[] {
  const level = /^v(\d+)$/.exec(variant);
  if (level && (architecture === 'amd64' || architecture === 'arm')) {
    const lowest = architecture === 'arm' ? 5 : 1;
    const out: string[] = [];
    for (let n = Number(level[1]); n >= lowest; n--) out.push(`v${n}`);
    return out;
  }
  return [variant];
}

/**
 * Index of the best entry for `host`, or -1. Entries without a platform are skipped (attestations and the like
 * carry "unknown/unknown"); among compatible entries the highest variant the host supports wins, then list order.
 */
export function selectPlatform(entries: ReadonlyArray<{ platform?: Platform }>, host: Platform = HOST_PLATFORM): number {
  const want = normalizePlatform(host);
  const ranks = compatibleVariants(want.architecture, want.variant);
  let best = -1;
  let bestRank = Infinity;
  entries.forEach((e, i) => {
    if (!e.platform) return;
    const p = normalizePlatform(e.platform);
    if (p.os !== want.os || p.architecture !== want.architecture) return;
    const rank = ranks.indexOf(p.variant);
    if (rank >= 0 && rank < bestRank) { best = i; bestRank = rank; }
  });
  return best;
}

export function formatPlatform(p: Platform): string {
  return `${p.os}/${p.architecture}${p.variant ? `/${p.variant}` : ''}`;
}
