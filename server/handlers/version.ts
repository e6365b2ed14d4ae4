// Version: who we are and which CRI we speak.
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

/** The kubelet-facing API version field; every CRI runtime answers this constant. */
const KUBELET_API_VERSION = '0.1.0';

export function Version(edge: Pick<Edge, 'version'>): RuntimeRpc<'Version'> {
  const response = { version: KUBELET_API_VERSION, runtime_name: 'minicri', runtime_version: edge.version, runtime_api_version: 'v1' };
  return () => response;
}
