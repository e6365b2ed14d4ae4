// One OciRuntime per configured handler, with absolute binary paths (conmon needs them; a missing
// binary is reported by Status rather than refused here).
import { join } from 'node:path';
import { OciRuntime } from '../oci/runtime/runc.js';
import { runtimeRoot, type Config } from './config.js';
import { resolveExecutable } from '../core/executables.js';
import type { Logger } from '../core/log.js';

export async function openRuntimes(config: Config, log: Logger): Promise<Map<string, OciRuntime>> {
  const conmonPath = resolveExecutable(config.conmon_path) ?? config.conmon_path;
  const entries = await Promise.all(Object.entries(config.runtimes).map(async ([handler, r]) => [handler, new OciRuntime({
    runtimePath: resolveExecutable(r.path) ?? r.path, conmonPath, root: runtimeRoot(config, handler),
    stateDir: join(config.state_dir, 'runtime', handler), log: log.child({ module: 'runtime', handler }), cgroupManager: config.cgroup_driver,
  })] as const));
  return new Map(entries);
}
