// RuntimeService: RPC name → handler. Each group of RPCs lives in its own module.
import type { RuntimeServiceHandlers } from '../gen/runtime/v1/RuntimeService.js';
import { containerCreateHandlers } from '../pod/container-create.js';
import { containerExecHandlers } from './container-exec.js';
import { containerRemoveHandlers } from '../pod/container-remove.js';
import { containerStartHandlers } from '../pod/container-start.js';
import { containerStatsHandlers } from '../pod/stats.js';
import { containerStatusHandlers } from './container-status.js';
import { containerStopHandlers } from '../pod/container-stop.js';
import { containerStreamingHandlers } from './container-streaming.js';
import { containerUpdateHandlers } from './container-update.js';
import type { Deps } from '../pod/context.js';
import type { ListEncoders } from './list-encoding.js';
import { runtimeConfigHandlers } from './runtime-config.js';
import { sandboxRemoveHandlers } from '../pod/sandbox-remove.js';
import { sandboxRunHandlers } from '../pod/sandbox-run.js';
import { sandboxStatusHandlers } from './sandbox-status.js';
import { sandboxStopHandlers } from '../pod/sandbox-stop.js';
import type { HandlerMap } from './service.js';
import { statusHandlers } from './status.js';
import { versionHandlers } from './version.js';

export type RuntimeHandlers = HandlerMap<RuntimeServiceHandlers>;

/** `lists` encodes the relist answers; the list handlers keep it warm. */
export function runtimeService(deps: Deps, lists: ListEncoders): RuntimeHandlers {
  return {
    ...versionHandlers(deps),
    ...statusHandlers(deps),
    ...runtimeConfigHandlers(deps),
    ...sandboxRunHandlers(deps),
    ...sandboxStopHandlers(deps),
    ...sandboxRemoveHandlers(deps),
    ...sandboxStatusHandlers(deps, lists.sandboxes),
    ...containerCreateHandlers(deps),
    ...containerStartHandlers(deps),
    ...containerStopHandlers(deps),
    ...containerRemoveHandlers(deps),
    ...containerStatusHandlers(deps, lists.containers),
    ...containerExecHandlers(deps),
    ...containerUpdateHandlers(deps),
    ...containerStatsHandlers(deps),
    ...containerStreamingHandlers(deps),
  };
}
