// CNI spec versions minicri speaks; they are compared with core/version.ts.
export { compareVersions, versionAtLeast } from '../core/version.js';

/** Versions whose configs we accept and whose results we parse. */
export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;

export function isSupportedVersion(v: unknown): v is string {
  return typeof v === 'string' && (SUPPORTED_VERSIONS as readonly string[]).includes(v);
}
