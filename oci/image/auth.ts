// Registry authentication pieces that need no I/O: WWW-Authenticate challenges and CRI credentials.
import { InvalidArgument } from '../../core/errors.js';
import type { AuthConfig } from './types.js';

export interface Challenge {
  /** Lowercased: "bearer", "basic". */
  scheme: string;
  /** Parameter names lowercased: realm, service, scope, error. */
  params: Record<string, string>;
}

/**
 * Parses a WWW-Authenticate value (RFC 7235): one or more challenges, each a scheme followed by
 * comma-separated name=value pairs whose values may be quoted strings with backslash escapes.
 */
export function parseWwwAuthenticate(header: string): Challenge[] {
  const out: Challenge[] = [];
  let i = 0;
  const n = header.length;
  const skipWs = () => { while (i < n && (header[i] === ' ' || header[i] === '\t')) i++; };
  const token = () => { const s = i; while (i < n && /[!#$%&'*+\-.^_`|~0-9A-Za-z]/.test(header[i]!)) i++; return header.slice(s, i); };
  while (i < n) {
    skipWs();
    if (header[i] === ',') { i++; continue; }
    const scheme = token();
    if (!scheme) break;
    const challenge: Challenge = { scheme: scheme.toLowerCase(), params: {} };
    out.push(challenge);
    for (;;) {
      skipWs();
      const save = i;
      const name = token();
      skipWs();
      if (!name || header[i] !== '=') { i = save; break; }
      i++;
      skipWs();
      let value = '';
      if (header[i] === '"') {
        i++;
        while (i < n && header[i] !== '"') {
          if (header[i] === '\\' && i + 1 < n) i++;
          value += header[i++];
        }
        i++;
      } else {
        value = token();
      }
      challenge.params[name.toLowerCase()] = value;
      skipWs();
      if (header[i] === ',') i++;
    }
  }
  return out;
}

/** Username and password from a CRI AuthConfig: explicit fields win over the base64 `auth` field. */
export function basicCredentials(auth: AuthConfig | undefined): { username: string; password: string } | undefined {
  if (!auth) return undefined;
  if (auth.username) return { username: auth.username, password: auth.password ?? '' };
  if (auth.auth) {
    const decoded = Buffer.from(auth.auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon <= 0) throw new InvalidArgument('auth config "auth" field must be base64 of "username:password"');
    return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
  }
  return undefined;
}

export function basicHeader(c: { username: string; password: string }): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
}

/** The pull scope the distribution token spec expects for a repository. */
export function pullScope(repository: string): string {
  return `repository:${repository}:pull`;
}
