// Per-host TLS from a certs.d directory, laid out as containerd and CRI-O read it: <dir>/<host:port>/ holds
// CA certificates (ca.crt, any *.crt) and a client certificate (client.cert + client.key, or any X.cert + X.key).
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
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

/**
 * The directories tried for `hostPort`, in order, as containerd's hosts directory has them: "host_port_", then
 * "host:port" exactly, so a directory for "example.com" is not one for "example.com:5000" (CRI-O's
 * containers/image reads only "host:port" too); Docker Hub's API hosts also as "docker.io"; then "_default".
 */
export function certsDirCandidates(hostPort: string): string[] {
  const port = /^(.+):(\d+)$/.exec(hostPort);
  const out = port ? [`${port[1]}_${port[2]}_`, hostPort] : [hostPort];
  if (hostPort === 'registry-1.docker.io' || hostPort === 'index.docker.io') out.push('docker.io');
  out.push('_default');
  return out;
}

/** Reads the first certs.d directory that exists for `hostPort`; undefined when none does. */
export async function readHostTls(certsDir: string, hostPort: string): Promise<HostTls | undefined> {
  for (const name of certsDirCandidates(hostPort)) {
    const dir = join(certsDir, name);
    let files: string[];
    try {
      files = (await readdir(dir)).sort();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      throw new FailedPrecondition(`cannot read certs.d directory ${dir}: ${(err as Error).message}`);
    }
    // A file that cannot be read (a dangling link, no permission) is a broken setting, not a network failure.
    const read = (f: string) => readFile(join(dir, f), 'utf8').catch((err: Error) => {
      throw new FailedPrecondition(`cannot read ${join(dir, f)} in certs.d: ${err.message}`);
    });
    const tls: HostTls = { dir, ca: await Promise.all(files.filter((f) => f.endsWith('.crt')).map(read)) };
    const certs = files.filter((f) => f.endsWith('.cert'));
    for (const c of certs) {
      const key = `${c.slice(0, -'.cert'.length)}.key`;
      if (!files.includes(key)) throw new FailedPrecondition(`client certificate ${join(dir, c)} has no key ${key} beside it`);
    }
    // client.cert is the documented name; another pair is used when it is the only one.
    const pair = certs.includes('client.cert') ? 'client.cert' : certs[0];
    if (pair) {
      tls.cert = await read(pair);
      tls.key = await read(`${pair.slice(0, -'.cert'.length)}.key`);
    }
    return tls;
  }
  return undefined;
}

/**
 * HTTP dispatchers per host: the default one unless certs.d has something for the host or its certificate is
 * not to be verified. certs.d is read when a pull begins (refresh), once per host, not on every request, so an
 * edited file takes effect on the next pull. Agents are kept per distinct material.
 */
export class TlsDispatchers {
  private readonly agents = new Map<string, Agent>();
  /** What certs.d held for each host asked about since the last refresh. */
  private read = new Map<string, Promise<HostTls | undefined>>();

  constructor(private readonly certsDir: string | undefined) {}

  /** A pull begins: each host's directory is read again the next time it is needed. */
  refresh(): void {
    this.read = new Map();
  }

  /** The dispatcher for an https URL's host, or undefined for the default. */
  async for(url: URL, skipVerify: boolean): Promise<Agent | undefined> {
    if (url.protocol !== 'https:') return undefined;
    const tls = await this.hostTls(url.host);
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

  private hostTls(hostPort: string): Promise<HostTls | undefined> {
    if (!this.certsDir) return Promise.resolve(undefined);
    let tls = this.read.get(hostPort);
    if (!tls) {
      tls = readHostTls(this.certsDir, hostPort);
      this.read.set(hostPort, tls);
    }
    return tls;
  }
}
