// Version: who we are and which CRI we speak.
import type { VersionResponse } from '../gen/runtime/v1/VersionResponse.js';
import type { Deps } from '../pod/context.js';
import type { RuntimeHandlers } from './runtime-service.js';

/** The kubelet-facing API version field; every CRI runtime answers this constant. */
const KUBELET_API_VERSION = '0.1.0';

export function versionHandlers(deps: Deps): RuntimeHandlers {
  const response: VersionResponse = {
    version: KUBELET_API_VERSION,
    runtime_name: 'minicri',
    runtime_version: deps.version,
    runtime_api_version: 'v1',
  };
  return { Version: () => response };
}
