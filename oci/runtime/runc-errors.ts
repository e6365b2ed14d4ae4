// runc reports failures as logrus lines on stderr:
//   time="…" level=error msg="container does not exist"
// These pure helpers pull out the human message so our errors carry runc's own words without the noise.

/** runc's error message(s) from its stderr (or a conmon sync message); the raw text when not in logrus form. */
export function runcErrorText(stderr: string): string {
  const messages: string[] = [];
  for (const line of stderr.split('\n')) {
    if (!/\blevel=(error|fatal|warning)\b/.test(line)) continue;
    const m = /\bmsg="((?:[^"\\]|\\.)*)"/.exec(line);
    if (m) messages.push(unquote(m[1]!));
  }
  return messages.length > 0 ? messages.join('; ') : stderr.trim();
}

export function isNotExist(text: string): boolean {
  return /container does not exist/i.test(text);
}

export function isNotRunning(text: string): boolean {
  return /container not running|process already finished|container is (stopped|not running)/i.test(text);
}

function unquote(s: string): string {
  try {
    return JSON.parse(`"${s}"`) as string;
  } catch {
    return s; // an escape JSON does not know (e.g. \x..): keep it as written
  }
}
