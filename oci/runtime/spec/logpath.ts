// The container log file kubelet asks for: log_path relative to the pod's log_directory.
import path from 'node:path';
import { InvalidArgument } from '../../../core/errors.js';

/**
 * The host path of a container's log, or undefined when the pod or container asks for none.
 * The result must stay inside logDirectory: "../" or an absolute log_path cannot escape it.
 */
export function containerLogPath(logDirectory: string, logPath: string): string | undefined {
  if (logDirectory === '' || logPath === '') return undefined;
  if (!path.posix.isAbsolute(logDirectory)) {
    throw new InvalidArgument(`pod log_directory "${logDirectory}" is not absolute`);
  }
  const dir = path.posix.normalize(logDirectory).replace(/\/+$/, '') || '/';
  const full = path.posix.normalize(path.posix.join(dir, logPath));
  if (path.posix.isAbsolute(logPath) || full === dir || !full.startsWith(dir === '/' ? '/' : `${dir}/`)) {
    throw new InvalidArgument(
      `container log_path "${logPath}" escapes the pod log directory "${logDirectory}": use a relative path such as name/0.log`,
    );
  }
  return full;
}
