// How much of what a registry sends a pull takes at most. A registry is anyone's (an image names it), so every
// body it sends and every list it serves has a limit; a refusal names the limit and the config key that raises it.
import { ResourceExhausted } from '../../core/errors.js';

/**
 * Layers a node downloads (and unpacks) at once, across all pulls: with two unpack workers, a 4-layer image
 * pulled about a tenth faster than at three (its last layer no longer unpacks alone); six did no better than
 * four on an 8-layer image.
 */
export const DEFAULT_CONCURRENT_DOWNLOADS = 4;

export interface RegistryLimits {
  /** Bytes of an error or token body (an error body past it is cut short for the message; a token is refused). */
  responseBytes: number;
  /** Bytes of a manifest or an index. */
  manifestBytes: number;
  /** Bytes of an image config. */
  configBytes: number;
  /** Layers of one manifest. */
  layers: number;
  /** Registry tokens kept for later requests; the least recently used goes first. */
  tokenCacheEntries: number;
  /** How long a cached token is used at most, whatever lifetime the token server gives it. */
  tokenLifetimeSeconds: number;
}

/** The config key of each limit, under [registries]. */
export const LIMIT_KEYS: Record<keyof RegistryLimits, string> = {
  responseBytes: 'registries.max_response_bytes',
  manifestBytes: 'registries.max_manifest_bytes',
  configBytes: 'registries.max_config_bytes',
  layers: 'registries.max_layers',
  tokenCacheEntries: 'registries.token_cache_entries',
  tokenLifetimeSeconds: 'registries.token_cache_max_seconds',
};

/**
 * The defaults. Manifests as containerd takes them (4 MiB); a config of 8 MiB is far above any real image's
 * (tens of KiB). 200 layers: each lowerdir of minicri's overlay takes 17 bytes of the one page of mount data,
 * which leaves room for about 210 beside the upper and work paths (the kernel itself stacks at most 500).
 */
export const DEFAULT_REGISTRY_LIMITS: RegistryLimits = {
  responseBytes: 1 << 20,
  manifestBytes: 4 << 20,
  configBytes: 8 << 20,
  layers: 200,
  tokenCacheEntries: 1000,
  tokenLifetimeSeconds: 3600,
};

/** What is over `limit` (how big, when known), naming the key to raise. */
export function overLimitMessage(what: string, limit: keyof RegistryLimits, value: number, size?: number): string {
  const unit = limit === 'layers' ? 'layers' : 'bytes';
  const has = size === undefined ? `is over ${value} ${unit}` : `has ${size} ${unit}, over ${value}`;
  return `${what} ${has}, the limit ${LIMIT_KEYS[limit]} sets: raise it in the config to pull this image`;
}

export function overLimit(what: string, limit: keyof RegistryLimits, value: number, size?: number): ResourceExhausted {
  return new ResourceExhausted(overLimitMessage(what, limit, value, size));
}
