// Pure helpers behind netns.ts: the names of pins and their links.

/** Prefix of every namespace pin minicri creates; recovery lists pins by it. */
export const NETNS_PREFIX = 'minicri-';

export function netnsPinName(hex: string): string {
  return `${NETNS_PREFIX}${hex}`;
}

/** `<pod name>-<hex>`; the pod name is made safe for a file name and kept short. */
export function netnsSymlinkName(podName: string, hex: string): string {
  const safe = podName.replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[.-]+/, '').slice(0, 200) || 'pod';
  return `${safe}-${hex}`;
}
