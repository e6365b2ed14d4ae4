// Commands in the VM over ssh, as root with the image's key, through the port qemu forwards from the host's
// loopback. Output can be streamed line by line into the test's log while it runs.
import { execa } from 'execa';

export interface SshResult { exitCode: number; stdout: string; stderr: string }

export interface SshOptions {
  /** Fed to the remote command's stdin: text, or a file on the host. */
  input?: string;
  inputFile?: string;
  /** Milliseconds before the command is killed (default 10 minutes). */
  timeout?: number;
  /** Each line of output, as it comes, besides the result (e.g. into the test's log). */
  onLine?: (line: string) => void;
}

export class Ssh {
  /** `control`: a socket path for one shared connection (a handshake costs seconds in an emulated guest). */
  constructor(readonly port: number, readonly key: string, private readonly control?: string) {}

  /** The ssh command line to the guest, without the remote command. */
  get args(): string[] {
    // The shared connection's master ends 30 s after its last session, and with the guest: it never outlives the test for long.
    const shared = this.control ? ['-o', 'ControlMaster=auto', '-o', `ControlPath=${this.control}`, '-o', 'ControlPersist=30s'] : [];
    return ['-i', this.key, '-p', String(this.port), '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null',
      '-o', 'LogLevel=ERROR', '-o', 'ConnectTimeout=10', '-o', 'ServerAliveInterval=15', '-o', 'ServerAliveCountMax=8', ...shared, 'root@127.0.0.1'];
  }

  /** Ends the shared connection's master, if there is one. */
  async close(): Promise<void> {
    if (this.control) await execa('ssh', ['-o', `ControlPath=${this.control}`, '-O', 'exit', 'root@127.0.0.1'], { reject: false });
  }

  /** Runs `script` with the guest's sh; never throws on a non-zero exit (the caller asserts it). */
  async run(script: string, opts: SshOptions = {}): Promise<SshResult> {
    const proc = execa('ssh', [...this.args, script], {
      reject: false, timeout: opts.timeout ?? 600_000, buffer: true,
      ...(opts.inputFile ? { inputFile: opts.inputFile } : { input: opts.input ?? '' }),
    });
    if (opts.onLine) {
      for (const stream of [proc.stdout!, proc.stderr!]) {
        let rest = '';
        stream.on('data', (chunk: Buffer) => {
          const lines = (rest + chunk.toString()).split('\n');
          rest = lines.pop()!;
          for (const l of lines) opts.onLine!(l);
        });
        stream.on('end', () => { if (rest) opts.onLine!(rest); });
      }
    }
    const r = await proc;
    if (r.timedOut) return { exitCode: -1, stdout: String(r.stdout), stderr: `${String(r.stderr)}\n(ssh: timed out after ${(opts.timeout ?? 600_000) / 1000} s)` };
    return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
  }

  /** Runs `script` and returns its stdout, throwing with its output when it fails. */
  async check(script: string, opts: SshOptions = {}): Promise<string> {
    const r = await this.run(script, opts);
    if (r.exitCode !== 0) throw new Error(`in the VM, \`${script}\` exited ${r.exitCode}:\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-4000)}`);
    return r.stdout;
  }

  /** Streams a tar archive made on the host (`tar` arguments, run in `cwd`, `input` its stdin) into `dir` in the guest. */
  async tarInto(dir: string, tarArgs: string[], cwd: string, input = ''): Promise<void> {
    // One shell pipeline: when either side fails the other gets SIGPIPE or EOF, never a hang.
    const r = await execa('bash', ['-o', 'pipefail', '-c', 'n=$1; shift; tar -cf - "${@:1:n}" | ssh "${@:n+1}"', 'bash',
      String(tarArgs.length), ...tarArgs, ...this.args, `mkdir -p '${dir}' && tar -xf - -C '${dir}'`], { cwd, input, reject: false });
    if (r.exitCode !== 0) throw new Error(`copying into the VM's ${dir} failed (${r.exitCode}): ${String(r.stderr).slice(-2000)}`);
  }

  /** Copies the files `listScript` prints (one path a line, relative to `from` in the guest) into `to` on the host. */
  async tarOut(from: string, listScript: string, to: string): Promise<number> {
    const list = (await this.check(`cd '${from}' && ${listScript}`)).split('\n').filter(Boolean);
    if (list.length === 0) return 0;
    const r = await execa('bash', ['-o', 'pipefail', '-c', 'to=$1; shift; ssh "$@" | tar -xf - -C "$to"', 'bash', to, ...this.args, `cd '${from}' && tar -cf - -T -`],
      { input: list.join('\n') + '\n', reject: false });
    if (r.exitCode !== 0) throw new Error(`copying the VM's ${from} out failed (${r.exitCode}): ${String(r.stderr).slice(-2000)}`);
    return list.length;
  }
}
