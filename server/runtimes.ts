// One OciRuntime per configured handler, with absolute binary paths (conmon needs them; a missing
// binary is reported by Status rather than refused here).
import { join } from 'node:path';
import { OciRuntime } from '../oci/runtime/runc.js';
import { runtimeRoot, type Config } from './config.js';
import { resolveExecutable } from '../core/executables.js';
import type { Logger } from '../core/log.js';
import type { ImageSpec__Output } from '../gen/runtime/v1/ImageSpec.js';
import { runtimeHandlerNamed } from '../pod/validation.js';
import type { Edge } from './edge.js';

export async function openRuntimes(config: Config, log: Logger): Promise<Map<string, OciRuntime>> {
  const conmonPath = resolveExecutable(config.conmon_path) ?? config.conmon_path;
  const criuPath = resolveExecutable(config.criu_path) ?? config.criu_path;
  const entries = await Promise.all(Object.entries(config.runtimes).map(async ([handler, r]) => [handler, new OciRuntime({
    runtimePath: resolveExecutable(r.path) ?? r.path, conmonPath, root: runtimeRoot(config, handler),
    stateDir: join(config.state_dir, 'runtime', handler), log: log.child({ module: 'runtime', handler }),
    cgroupManager: config.cgroup_driver,
    criuPath,
  })] as const));
  return new Map(entries);
}

/**
 * Refuses an ImageSpec whose runtime_handler is not configured ('' is the default), as the CRI asks of PullImage
 * and the other image RPCs. All handlers share one image store, so a known handler changes nothing else.
 */
export function checkImageRuntimeHandler(edge: Edge, spec: ImageSpec__Output | null | undefined): void {
  runtimeHandlerNamed(spec?.runtime_handler ?? '', edge.config.default_runtime, edge.pods.runtimes.keys());
}
