// Container events (evented PLEG): CREATED, STARTED, STOPPED and DELETED of every container and of each
// sandbox's pause (named by the sandbox id, as containerd names it). Every transition of state.ts is
// written through the record tables, whoever makes it (a lifecycle operation, the exit watcher, recovery,
// the background retry), so the events come from those writes: a listener on the tables compares each
// written record with the state it last saw and publishes what changed, synchronously, right after the
// write. No path can change a state without its event, and nothing polls.
import { nowNanos } from '../core/time.js';
import { EventHub, type EventSink } from './event-hub.js';
import type { ContainerRecord, SandboxRecord, Tables } from './records.js';

export type ContainerEventType =
  'CONTAINER_CREATED_EVENT' | 'CONTAINER_STARTED_EVENT' | 'CONTAINER_STOPPED_EVENT' | 'CONTAINER_DELETED_EVENT';

/**
 * One event, with the sandbox and its containers as they are right after the change. The records are the
 * tables' own objects: a record is replaced, never changed, once its creation is over, so these stay as
 * they were when the event was made.
 */
export interface PodEvent {
  type: ContainerEventType;
  /** The container's id, or the sandbox's for its pause. */
  containerId: string;
  /** Nanoseconds since the epoch, as a decimal string. */
  createdAt: string;
  sandbox: SandboxRecord;
  containers: ContainerRecord[];
}

/** What the events need of a record: its state and whether its creation is over. */
interface Seen {
  state: string;
  creating: boolean;
}

function seen(r: { state: string; creating?: boolean }): Seen {
  return { state: r.state, creating: r.creating === true };
}

/**
 * The events a write makes, from the state seen before (none: the record is new) to the state now (none:
 * deleted). Records still being created make none: kubelet learns of a container when its creation is done,
 * and one whose creation is undone never existed for it.
 */
export function eventsOf(before: Seen | undefined, now: Seen | undefined, running: string, exited: string): ContainerEventType[] {
  if (!now) return before && !before.creating ? ['CONTAINER_DELETED_EVENT'] : [];
  if (now.creating) return [];
  const created = !before || before.creating;
  const events: ContainerEventType[] = created ? ['CONTAINER_CREATED_EVENT'] : [];
  const was = created ? '' : before.state;
  // Entering the running state (a sandbox's READY) starts it, entering the exited one (NOTREADY) stops it.
  if (now.state === running && was !== running) events.push('CONTAINER_STARTED_EVENT');
  if (now.state === exited && was !== exited) events.push('CONTAINER_STOPPED_EVENT');
  return events;
}

/** Publishes the events of every change written to the sandbox and container tables from now on. */
function publishPodEvents(tables: Pick<Tables, 'sandboxes' | 'containers'>, sink: EventSink<PodEvent>): void {
  const { sandboxes, containers } = tables;
  // A container's sandbox is kept with its state: its DELETED event names the sandbox after the record is gone.
  const containerStates = new Map(containers.list().map((r) => [r.id, { ...seen(r), sandboxId: r.sandboxId }]));
  const sandboxStates = new Map(sandboxes.list().map((r) => [r.id, seen(r)]));
  const publish = (types: ContainerEventType[], containerId: string, sandbox: SandboxRecord | undefined) => {
    if (types.length === 0 || !sandbox || !sink.listening) return;
    const podContainers = containers.list().filter((c) => c.sandboxId === sandbox.id);
    for (const type of types) sink.publish({ type, containerId, createdAt: nowNanos(), sandbox, containers: podContainers });
  };

  containers.onChange((id) => {
    const record = containers.get(id);
    const before = containerStates.get(id);
    if (record) containerStates.set(id, { ...seen(record), sandboxId: record.sandboxId });
    else containerStates.delete(id);
    const sandboxId = record?.sandboxId ?? before?.sandboxId;
    publish(
      eventsOf(before, record && seen(record), 'CONTAINER_RUNNING', 'CONTAINER_EXITED'),
      id,
      sandboxId === undefined ? undefined : sandboxes.get(sandboxId),
    );
  });
  // A deleted sandbox's DELETED event carries the record it had last.
  const lastSandbox = new Map(sandboxes.list().map((r) => [r.id, r]));
  sandboxes.onChange((id) => {
    const record = sandboxes.get(id);
    const before = sandboxStates.get(id);
    const last = record ?? lastSandbox.get(id);
    if (record) {
      sandboxStates.set(id, seen(record));
      lastSandbox.set(id, record);
    } else {
      sandboxStates.delete(id);
      lastSandbox.delete(id);
    }
    publish(eventsOf(before, record && seen(record), 'SANDBOX_READY', 'SANDBOX_NOTREADY'), id, last);
  });
}

/** The hub of the events of `tables`' changes; `bound`: how many events a subscriber may lag behind. */
export function podEvents(tables: Pick<Tables, 'sandboxes' | 'containers'>, bound: number): EventHub<PodEvent> {
  const hub = new EventHub<PodEvent>(bound);
  publishPodEvents(tables, hub);
  return hub;
}
