// NetworkAttachmentDefinitions (k8s.cni.cncf.io/v1) read from a directory of YAML or JSON files, so the
// output of `kubectl get net-attach-def -o yaml` can be dropped in as it is: several documents per file,
// `kind: List` wrappers, any metadata kubectl adds. Parsing is pure; only loadDefinitions reads the disk.
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { InvalidArgument } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { parseNetworkList, type NetworkList } from './config.js';
import { DRA_CLAIM_ANNOTATION, DRA_DRIVER_ANNOTATION, DRA_POOL_ANNOTATION, type DraSelector } from './dra.js';

const RESOURCE_NAME_ANNOTATION = 'k8s.v1.cni.cncf.io/resourceName';
const DEFINITION_EXTENSIONS = ['.yaml', '.yml', '.json'];

export interface AttachmentDefinition {
  namespace: string;
  name: string;
  /** The device plugin resource whose devices back this network (SR-IOV VFs and the like). */
  resourceName?: string;
  /** The DRA devices that back this network instead (driver, optionally pool and claim). */
  dra?: DraSelector;
  /** The CNI network, or undefined when spec.config is empty: then the conf dir's network named `name` is used. */
  list?: NetworkList;
  source: string;
}

/** DNS-1123 label: what a Kubernetes namespace name must be. */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** DNS-1123 subdomain: what most object names (a NetworkAttachmentDefinition's too) must be. */
export const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

const definitionSchema = z.object({
  apiVersion: z.literal('k8s.cni.cncf.io/v1'),
  kind: z.literal('NetworkAttachmentDefinition'),
  metadata: z.object({
    name: z.string().regex(DNS_SUBDOMAIN, 'must be a DNS-1123 subdomain'),
    namespace: z.string().regex(DNS_LABEL, 'must be a DNS-1123 label').default('default'),
    annotations: z.record(z.string(), z.string()).nullish(),
  }),
  spec: z.object({ config: z.string().nullish() }).nullish(),
});

const listSchema = z.object({ kind: z.literal('List'), items: z.array(z.unknown()) });

export function definitionKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** Every definition in one file's text (YAML or JSON, one or more documents, `kind: List` unwrapped). */
export function parseDefinitionFile(text: string, source: string): AttachmentDefinition[] {
  const objects: unknown[] = [];
  for (const [i, doc] of parseAllDocuments(text).entries()) {
    if (doc.errors.length > 0) throw new InvalidArgument(`${source}: document ${i + 1} is not valid YAML: ${doc.errors[0]!.message}`);
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) continue; // an empty document (a trailing ---)
    const list = listSchema.safeParse(value);
    objects.push(...(list.success ? list.data.items : [value]));
  }
  return objects.map((obj, i) => parseDefinition(obj, `${source} (object ${i + 1})`));
}

export function parseDefinition(obj: unknown, source: string): AttachmentDefinition {
  const parsed = definitionSchema.safeParse(obj);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new InvalidArgument(`${source}: ${issue.path.length > 0 ? `${issue.path.join('.')}: ` : ''}${issue.message}`);
  }
  const { metadata, spec } = parsed.data;
  const where = `NetworkAttachmentDefinition ${definitionKey(metadata.namespace, metadata.name)} in ${source}`;
  const config = spec?.config?.trim();
  const annotation = (key: string) => metadata.annotations?.[key]?.trim() || undefined;
  const resourceName = annotation(RESOURCE_NAME_ANNOTATION);
  const dra = draSelector(annotation, where);
  if (dra && resourceName) {
    const both = `annotations ${RESOURCE_NAME_ANNOTATION} and ${DRA_DRIVER_ANNOTATION}`;
    throw new InvalidArgument(`${where}: ${both} both name the network's device: keep one`);
  }
  return {
    namespace: metadata.namespace,
    name: metadata.name,
    ...(resourceName ? { resourceName } : {}),
    ...(dra ? { dra } : {}),
    ...(config ? { list: parseNetworkList(Buffer.from(config), where) } : {}),
    source,
  };
}

function draSelector(annotation: (key: string) => string | undefined, where: string): DraSelector | undefined {
  const driver = annotation(DRA_DRIVER_ANNOTATION);
  const pool = annotation(DRA_POOL_ANNOTATION);
  const claim = annotation(DRA_CLAIM_ANNOTATION);
  if (!driver) {
    if (pool || claim) {
      throw new InvalidArgument(`${where}: ${pool ? DRA_POOL_ANNOTATION : DRA_CLAIM_ANNOTATION} needs ${DRA_DRIVER_ANNOTATION}`);
    }
    return undefined;
  }
  if (claim !== undefined && !DNS_SUBDOMAIN.test(claim)) {
    throw new InvalidArgument(`${where}: ${DRA_CLAIM_ANNOTATION} "${claim}" is not a valid ResourceClaim name (a DNS-1123 subdomain)`);
  }
  return { driver, ...(pool ? { pool } : {}), ...(claim ? { claim } : {}) };
}

/** Reads every valid definition in `dir` (sorted by file name); invalid files are logged and skipped. */
export async function loadDefinitions(dir: string, log: Logger): Promise<Map<string, AttachmentDefinition>> {
  const out = new Map<string, AttachmentDefinition>();
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return out;
    throw err;
  }
  for (const name of names.filter((n) => DEFINITION_EXTENSIONS.includes(path.extname(n)) && !n.startsWith('.')).sort()) {
    const file = path.join(dir, name);
    let defs: AttachmentDefinition[];
    try {
      defs = parseDefinitionFile(await fs.readFile(file, 'utf8'), file);
    } catch (err) {
      log.warn({ file, reason: (err as Error).message }, 'skipping invalid network attachment definition file');
      continue;
    }
    for (const def of defs) {
      const key = definitionKey(def.namespace, def.name);
      if (out.has(key)) {
        log.warn({ file, network: key }, 'skipping network attachment definition: an earlier file defines the same one');
        continue;
      }
      out.set(key, def);
    }
  }
  return out;
}
