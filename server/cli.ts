// The `minicri` command line: `serve` (the default) runs the daemon, `config` prints the effective configuration,
// `doctor` lists (and repairs) minicri's host objects. main.ts loads it, bundled.
import { flushCompileCache } from 'node:module';
import { parseArgs } from 'node:util';
import { stringify } from 'smol-toml';
import { CONFIG_FLAGS, ConfigError, loadConfig, type Config } from './config.js';
import { startDaemon, VERSION } from './daemon.js';
import { socketAnswers } from './listen.js';
import { createLogger } from '../core/log.js';

interface DoctorFlags { repair: boolean; force: boolean; json: boolean }

const USAGE = `usage: minicri [serve|config|doctor|version] [--config FILE] [--FLAG VALUE ...]

  serve     run the CRI daemon (default)
  config    print the effective configuration as TOML
  doctor    list every host object of minicri (netns, mounts, runc containers, conmon, CNI
            attachments, IP reservations, iptables chains) against the store;
            --repair removes what no record explains (refused while the daemon runs, unless --force);
            --json prints the findings as JSON
  version   print the version

flags (each overrides its key in the config file):
${Object.entries(CONFIG_FLAGS).map(([flag, key]) => `  --${flag.padEnd(18)} ${key}`).join('\n')}
`;

function parseCommandLine(argv: string[]): { command: string; configPath?: string; overrides: Record<string, string>; flags: DoctorFlags } {
  const options = Object.fromEntries([
    ['config', { type: 'string' as const }],
    ['help', { type: 'boolean' as const, short: 'h' }],
    ['repair', { type: 'boolean' as const }],
    ['force', { type: 'boolean' as const }],
    ['json', { type: 'boolean' as const }],
    ...Object.keys(CONFIG_FLAGS).map((flag) => [flag, { type: 'string' as const }]),
  ]);
  const parsed = parseArgs({ args: argv, options, allowPositionals: true });
  const values = parsed.values as Record<string, string | boolean | undefined>;
  const positionals = parsed.positionals;
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const overrides: Record<string, string> = {};
  for (const [flag, key] of Object.entries(CONFIG_FLAGS)) {
    const value = values[flag];
    if (typeof value === 'string') overrides[key] = value;
  }
  if (positionals.length > 1) throw new ConfigError(`unexpected arguments: ${positionals.slice(1).join(' ')}`);
  const flags = { repair: values.repair === true, force: values.force === true, json: values.json === true };
  return { command: positionals[0] ?? 'serve', configPath: values.config as string | undefined, overrides, flags };
}

/** Lists minicri's host objects against the store; with --repair removes the orphans. Exit 1 while any remain. */
async function doctor(config: Config, flags: DoctorFlags): Promise<void> {
  const log = createLogger(flags.json ? 'silent' : 'warn');
  // Loaded only for this command: the daemon's start does without it.
  const { examine, formatFindings, repair } = await import('./doctor.js');
  let findings = await examine(config, log);
  if (flags.repair && findings.some((f) => f.status === 'orphan')) {
    if (!flags.force && await socketAnswers(config.socket)) {
      throw new ConfigError(`minicri is running on ${config.socket}: stop it before --repair (it repairs itself at start), or add --force`);
    }
    const errors = await repair(findings, config, log);
    for (const e of errors) process.stderr.write(`repair failed: ${e}\n`);
    findings = await examine(config, log);
  }
  process.stdout.write(flags.json ? `${JSON.stringify(findings.map(({ repair: _, ...f }) => f), null, 2)}\n` : formatFindings(findings));
  process.exitCode = findings.some((f) => f.status !== 'ok') ? 1 : 0;
}

async function serve(config: Config): Promise<void> {
  const log = createLogger(config.log_level);
  // A bug in one call must not take down every pod's runtime: log it and keep serving.
  process.on('uncaughtException', (err) => log.error({ err }, 'uncaught exception'));
  process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled promise rejection'));
  const daemon = await startDaemon(config, log);
  // Node writes the compile cache (main.ts) at exit, which a daemon killed with SIGKILL never reaches.
  flushCompileCache();
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    daemon.stop().then(
      () => log.flush(() => process.exit(0)),
      (err: unknown) => { log.error({ err }, 'shutdown failed'); log.flush(() => process.exit(1)); },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

async function main(): Promise<void> {
  try {
    const { command, configPath, overrides, flags } = parseCommandLine(process.argv.slice(2));
    if (command === 'version') {
      process.stdout.write(`minicri ${VERSION}\n`);
      return;
    }
    if (!['serve', 'config', 'doctor'].includes(command)) throw new ConfigError(`unknown command "${command}"\n${USAGE}`);
    const config = loadConfig(configPath, overrides);
    if (command === 'config') process.stdout.write(`${stringify(config)}\n`);
    else if (command === 'doctor') await doctor(config, flags);
    else await serve(config);
  } catch (err) {
    process.stderr.write(`minicri: ${(err as Error).message}\n`);
    process.exit(err instanceof ConfigError || (err as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? 2 : 1);
  }
}

await main();
