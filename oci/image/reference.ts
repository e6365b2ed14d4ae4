// Image references normalized the way containerd and CRI-O do (docker.io default registry, library/ prefix,
// latest default tag), so the same image has one name whichever spelling kubelet or a user sent.
import { InvalidArgument } from '../../core/errors.js';

export const DEFAULT_REGISTRY = 'docker.io';

export interface ImageRef {
  /** "docker.io", "registry.k8s.io", "127.0.0.1:5000". */
  registry: string;
  /** Path inside the registry: "library/busybox". */
  repository: string;
  tag?: string;
  /** "sha256:<64 hex>". */
  digest?: string;
}

const COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const PATH_RE = new RegExp(`^${COMPONENT}(?:/${COMPONENT})*$`);
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN_RE = new RegExp(`^(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?$`);
const TAG_RE = /^[\w][\w.-]{0,127}$/;
const DIGEST_RE = /^sha256:[a-f0-9]{64}$/;
const MAX_NAME = 255;

/** Parses and normalizes a reference; throws InvalidArgument naming it when malformed. */
export function parseReference(input: string): ImageRef {
  const bad = (why: string) => new InvalidArgument(`invalid image reference "${input}": ${why}`);
  if (input.length === 0) throw bad('it is empty');
  let rest = input;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST_RE.test(digest)) throw bad(`digest "${digest}" is not sha256:<64 lowercase hex>`);
  }
  let tag: string | undefined;
  const lastSlash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG_RE.test(tag)) throw bad(`tag "${tag}" must match [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`);
  }
  let registry = DEFAULT_REGISTRY;
  let repository = rest;
  const slash = rest.indexOf('/');
  if (slash >= 0) {
    const first = rest.slice(0, slash);
    if (first.includes('.') || first.includes(':') || first === 'localhost' || first !== first.toLowerCase()) {
      registry = first;
      repository = rest.slice(slash + 1);
    }
  }
  if (registry === 'index.docker.io' || registry === 'registry-1.docker.io') registry = DEFAULT_REGISTRY;
  if (!DOMAIN_RE.test(registry)) throw bad(`registry "${registry}" is not a valid host[:port]`);
  if (!PATH_RE.test(repository)) {
    throw bad(`repository "${repository}" must be lowercase path components [a-z0-9] separated by "/", ".", "_", "__" or "-"`);
  }
  if (registry === DEFAULT_REGISTRY && !repository.includes('/')) repository = `library/${repository}`;
  if (registry.length + 1 + repository.length > MAX_NAME) throw bad(`name longer than ${MAX_NAME} characters`);
  if (!tag && !digest) tag = 'latest';
  return { registry, repository, tag, digest };
}

/** "registry/repository". */
export function refName(r: ImageRef): string {
  return `${r.registry}/${r.repository}`;
}

/** The full normalized reference: name[:tag][@digest]. */
export function formatReference(r: ImageRef): string {
  return refName(r) + (r.tag ? `:${r.tag}` : '') + (r.digest ? `@${r.digest}` : '');
}
