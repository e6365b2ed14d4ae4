// Which credentials a request to a registry endpoint may carry: the pull's own (kubelet's AuthConfig) only to
// the registry they name, node-level ones from a Docker config.json file only to the host they are filed under.
import { readFileSync, statSync } from 'node:fs';
import { FailedPrecondition } from '../../core/errors.js';
import { DEFAULT_REGISTRY } from './reference.js';
import type { AuthConfig } from './types.js';

/** Docker Hub answers under several names; they are one registry for credentials. */
const DOCKER_HUB_ALIASES = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io']);

/**
 * The host[:port] a credential or endpoint names, lowercased, without scheme or path; Docker Hub's aliases
 * (and the legacy "https://index.docker.io/v1/" key) become "docker.io".
 */
export function credentialHost(address: string): string {
  const host = address.trim().replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').split('/')[0]!.toLowerCase();
  return DOCKER_HUB_ALIASES.has(host) ? DEFAULT_REGISTRY : host;
}

/**
 * True when the pull's AuthConfig may go to `registry`. kubelet fills server_address with the registry its
 * pull secret matched; a config without one was sent for the image's own registry.
 */
export function requestAuthApplies(auth: AuthConfig, registry: string): boolean {
  return !auth.serverAddress || credentialHost(auth.serverAddress) === credentialHost(registry);
}

/**
 * The `auths` of a Docker config.json (the format `docker login` and kubelet's pull secrets use): per host,
 * `auth` (base64 "user:password") or username/password, or an identitytoken / registrytoken.
 */
export function parseDockerConfig(text: string, file: string): Map<string, AuthConfig> {
  const bad = (why: string) => new FailedPrecondition(`registry credentials file ${file}: ${why}`);
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw bad(`not JSON (${(err as Error).message})`);
  }
  const auths = (doc as { auths?: unknown } | null)?.auths;
  if (auths === undefined) return new Map();
  if (typeof auths !== 'object' || auths === null || Array.isArray(auths)) throw bad('"auths" must be an object of host: credentials');
  const out = new Map<string, AuthConfig>();
  for (const [key, raw] of Object.entries(auths as Record<string, unknown>)) {
    if (typeof raw !== 'object' || raw === null) throw bad(`the entry for "${key}" must be an object`);
    const e = raw as Record<string, unknown>;
    const str = (name: string) => {
      const v = e[name];
      if (v !== undefined && typeof v !== 'string') throw bad(`"${name}" of "${key}" must be a string`);
      return v || undefined;
    };
    const auth: AuthConfig = {
      username: str('username'), password: str('password'), auth: str('auth'),
      identityToken: str('identitytoken'), registryToken: str('registrytoken'), serverAddress: key,
    };
    if (auth.auth && !/^[^:]+:/.test(Buffer.from(auth.auth, 'base64').toString('utf8'))) {
      throw bad(`"auth" of "${key}" must be base64 of "username:password"`);
    }
    out.set(credentialHost(key), auth);
  }
  return out;
}

/** Node-level credentials from a Docker config.json, re-read when the file changes; a missing file is none. */
export class CredentialFile {
  private cached: { mtimeMs: number; size: number; auths: Map<string, AuthConfig> } | undefined;

  constructor(readonly path: string | undefined) {}

  /** The credentials filed for `host` ("host[:port]" or a URL). */
  forHost(host: string): AuthConfig | undefined {
    return this.load().get(credentialHost(host));
  }

  private load(): Map<string, AuthConfig> {
    if (!this.path) return new Map();
    const st = statSync(this.path, { throwIfNoEntry: false });
    if (!st) return new Map();
    if (this.cached?.mtimeMs !== st.mtimeMs || this.cached.size !== st.size) {
      this.cached = { mtimeMs: st.mtimeMs, size: st.size, auths: parseDockerConfig(readFileSync(this.path, 'utf8'), this.path) };
    }
    return this.cached.auths;
  }
}
