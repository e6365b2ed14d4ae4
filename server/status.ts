// Status: whether the runtime and the pod network are ready, as kubelet's node-ready check reads it.
import { access, constants } from 'node:fs/promises';
import { delimiter, isAbsolute, join } from 'node:path';
import type { Deps } from './deps.js';
import type { RuntimeHandlers } from './runtime-service.js';

/** Whether `command` names an executable, directly or through PATH. */
async function executable(command: string): Promise<boolean> {
  const candidates = isAbsolute(command) ? [command] : (process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, command));
  for (const candidate of candidates) {
    if (await access(candidate, constants.X_OK).then(() => true, () => false)) return true;
  }
  return false;
}

async function runtimeCondition(deps: Deps) {
  const runtime = deps.config.runtimes[deps.config.default_runtime].path;
  const missing = [];
  if (!(await executable(runtime))) missing.push(`OCI runtime "${runtime}"`);
  if (!(await executable(deps.config.conmon_path))) missing.push(`conmon "${deps.config.conmon_path}"`);
  return missing.length === 0
    ? { type: 'RuntimeReady', status: true, reason: '', message: '' }
    : { type: 'RuntimeReady', status: false, reason: 'RuntimeBinaryMissing', message: `not executable: ${missing.join(', ')}; install it or fix the path in the config` };
}

export function statusHandlers(deps: Deps): RuntimeHandlers {
  return {
    Status: async (request) => {
      const [runtime, network] = await Promise.all([runtimeCondition(deps), deps.network.status()]);
      const conditions = [runtime, { type: 'NetworkReady', status: network.ready, reason: network.ready ? '' : network.reason, message: network.ready ? '' : network.message }];
      const info: Record<string, string> = {};
      if (request.verbose) {
        info.config = JSON.stringify(deps.config);
        const podCidr = deps.store.getMeta('pod_cidr');
        if (podCidr) info.podCidr = podCidr;
      }
      return { status: { conditions }, info, runtime_handlers: [] };
    },
  };
}
