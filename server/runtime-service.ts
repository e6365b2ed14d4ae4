// RuntimeService: RPC name → handler. Each group of RPCs lives in its own module.
import type { RuntimeServiceHandlers } from '../gen/runtime/v1/RuntimeService.js';
import type { Deps } from './deps.js';
import { runtimeConfigHandlers } from './runtime-config.js';
import type { HandlerMap } from './service.js';
import { statusHandlers } from './status.js';
import { versionHandlers } from './version.js';

export type RuntimeHandlers = HandlerMap<RuntimeServiceHandlers>;

export function runtimeService(deps: Deps): RuntimeHandlers {
  return {
    ...versionHandlers(deps),
    ...statusHandlers(deps),
    ...runtimeConfigHandlers(deps),
  };
}
