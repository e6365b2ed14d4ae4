// Per-host TLS from a certs.d directory, laid out as containerd and CRI-O read it: <dir>/<host[:port]>/ holds
// CA certificates (ca.crt, any *.crt) and a client certificate (client.cert + client.key, or any X.cert + X.key).
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { Agent } from 'undici';
import { FailedPrecondition } from '../../core/errors.js';

export interface HostTls {
  /** The directory it came from, for messages. */
  dir: string;
  /** PEM CA certificates, trusted besides the system's. */
  ca: string[];
  cert?: string;
  key?: string;
}

/** The directories tried for `hostPort`: "host:port" first, then the bare host; Docker Hub's API host also as docker.io. */
export function certsDirCandidates(hostPort: string): string[] {
  const host = hostPort.replace(/:\d+$/, '');
  const out = [hostPort];
  if (host !== hostPort) out.push(host);
  if (host === 'registry-1.docker.io' || host === 'index.docker.io') out.push('docker.io');
  return out;
}

/** Reads the first certs.d directory that exists for `hostPort`; undefined when none does. */
export function readHostTls(certsDir: string, hostPort: string): HostTls | undefined {
  for (const name of certsDirCandidates(hostPort)) {
    const dir = join(certsDir, name);
    let files: string[];
    try {
      files = readdirSync(dir).sort();
    } catch {
      continue;
    }
    const read = (f: string) => readFileSync(join(dir, f), 'utf8');
    const tls: HostTls = { dir, ca: files.filter((f) => f.endsWith('.crt')).map(read) };
    const certs = files.filter((f) => f.endsWith('.cert'));
    for (const c of certs) {
      const key = `${c.slice(0, -'.cert'.length)}.key`;
      if (!files.includes(key)) throw new FailedPrecondition(`client certificate ${join(dir, c)} has no key ${key} beside it`);
    }
    // client.cert is the documented name; another pair is used when it is the only one.
    const pair = certs.includes('client.cert') ? 'client.cert' : certs[0];
    if (pair) {
      tls.cert = read(pair);
      tls.key = read(`${pair.slice(0, -'.cert'.length)}.key`);
    }
    return tls;
  }
  return undefined;
}

/**
 * HTTP dispatchers per host: the default one unless certs.d has something for the host or its certificate is
 * not to be verified. Agents are kept per distinct material, so a changed file takes effect on the next request.
 */
export class TlsDispatchers {
  private readonly agents = new Map<string, Agent>();

  constructor(private readonly certsDir: string | undefined) {}

  /** The dispatcher for an https URL's host, or undefined for the default. */
  for(url: URL, skipVerify: boolean): Agent | undefined {
    if (url.protocol !== 'https:') return undefined;
    const tls = this.certsDir ? readHostTls(this.certsDir, url.host) : undefined;
    if (!tls && !skipVerify) return undefined;
    const material = { ca: tls?.ca ?? [], cert: tls?.cert, key: tls?.key, skipVerify };
    const id = createHash('sha256').update(JSON.stringify(material)).digest('hex');
    let agent = this.agents.get(id);
    if (!agent) {
      agent = new Agent({
        connect: {
          ca: material.ca.length > 0 ? [...rootCertificates, ...material.ca] : undefined,
          cert: material.cert, key: material.key, rejectUnauthorized: !skipVerify,
        },
      });
      this.agents.set(id, agent);
    }
    return agent;
  }
}
