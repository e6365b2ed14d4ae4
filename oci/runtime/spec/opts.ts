// The builder's shape: every concern is a SpecOpt factory that takes exactly the data it needs
// and returns a mutator of the draft spec. Builders are ordered lists of opts applied to a
// fresh skeleton, so each concern is testable alone against baseSpec().
import type { Linux, LinuxResources, Process, Spec } from './types.js';
import { OCI_VERSION } from './types.js';

export type SpecOpt = (spec: Spec) => void;

/** The skeleton every spec starts from: root uid/gid, cwd "/", no namespaces, devices denied. */
export function baseSpec(rootfs: string): Spec {
  return {
    ociVersion: OCI_VERSION,
    root: { path: rootfs },
    process: { user: { uid: 0, gid: 0 }, args: [], env: [], cwd: '/' },
    mounts: [],
    annotations: {},
    linux: {
      namespaces: [],
      // Deny every device first; opts add what the container may use (runc adds its own
      // small safe set: null, zero, full, random, urandom, tty, ptmx, pts).
      resources: { devices: [{ allow: false, access: 'rwm' }] },
    },
  };
}

export function applyOpts(spec: Spec, opts: readonly SpecOpt[]): Spec {
  for (const opt of opts) opt(spec);
  return spec;
}

export function processOf(spec: Spec): Process {
  spec.process ??= { user: { uid: 0, gid: 0 }, cwd: '/' };
  return spec.process;
}

export function linuxOf(spec: Spec): Linux {
  spec.linux ??= {};
  return spec.linux;
}

export function resourcesOf(spec: Spec): LinuxResources {
  const linux = linuxOf(spec);
  linux.resources ??= {};
  return linux.resources;
}
