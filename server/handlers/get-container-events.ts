// GetContainerEvents (evented PLEG): every container event from the subscription on, in order, with the pod's
// status right after the change. A client that reads slower than events come is cut off once
// container_events_buffer events wait for it (RESOURCE_EXHAUSTED); the daemon stopping ends the stream with
// UNAVAILABLE. Either way kubelet relists and subscribes again.
import { ResourceExhausted, Unavailable } from '../../core/errors.js';
import type { PodEvent } from '../../pod/events.js';
import type { ContainerEventResponse } from '../../gen/runtime/v1/ContainerEventResponse.js';
import { containerStatus, sandboxStatus, type ImageRecords } from '../cri-views.js';
import type { Edge } from '../edge.js';
import type { RuntimeRpc } from '../service.js';

function containerEvent(e: PodEvent, images: ImageRecords): ContainerEventResponse {
  return {
    container_id: e.containerId, container_event_type: e.type, created_at: e.createdAt,
    pod_sandbox_status: sandboxStatus(e.sandbox), containers_statuses: e.containers.map((c) => containerStatus(c, images)),
  };
}

export function GetContainerEvents(edge: Edge): RuntimeRpc<'GetContainerEvents'> {
  const hub = edge.pods.events;
  return async (_request, emit, _ctx, stream) => {
    const events = hub.subscribe();
    const leave = () => events.unsubscribe();
    stream.cancelled.addEventListener('abort', leave, { once: true });
    // From these headers on, the client gets every event (a test, or a client that relists, knows when that is).
    stream.sendHeaders();
    try {
      // The hub queues what comes while the client's buffer is full, and ends the subscription past its bound.
      for (let e = await events.next(); e; e = await events.next()) {
        if (!emit(containerEvent(e, edge.images))) await Promise.race([stream.drained(), events.done]);
      }
    } finally {
      stream.cancelled.removeEventListener('abort', leave);
      events.unsubscribe();
    }
    if (events.ended === 'overflow') {
      throw new ResourceExhausted(
        `the client fell more than ${hub.bound} events behind (container_events_buffer): relist and subscribe again`,
      );
    }
    if (events.ended === 'closed') throw new Unavailable('minicri is stopping: subscribe again once it serves, and relist');
  };
}
