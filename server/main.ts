#!/usr/bin/env node
// The `minicri` command: `serve` (the default) runs the daemon, `config` prints the effective configuration.
import { parseArgs } from 'node:util';
import { stringify } from 'smol-toml';
import { CONFIG_FLAGS, ConfigError, loadConfig, type Config } from './config.js';
import { startDaemon, VERSION } from './daemon.js';
import { createLogger } from './log.js';

const USAGE = `usage: minicri [serve|config|version] [--config FILE] [--FLAG VALUE ...]

  serve     run the CRI daemon (default)
  config    print the effective configuration as TOML
  version   print the version

flags (each overrides its key in the config file):
${Object.entries(CONFIG_FLAGS).map(([flag, key]) => `  --${flag.padEnd(18)} ${key}`).join('\n')}
`;

function parseCommandLine(argv: string[]): { command: string; configPath?: string; overrides: Record<string, string> } {
  const options = Object.fromEntries([
    ['config', { type: 'string' as const }],
    ['help', { type: 'boolean' as const, short: 'h' }],
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
  return { command: positionals[0] ?? 'serve', configPath: values.config as string | undefined, overrides };
}

async function serve(config: Config): Promise<void> {
  const log = createLogger(config.log_level);
  // A bug in one call must not take down every pod's runtime: log it and keep serving.
  process.on('uncaughtException', (err) => log.error({ err }, 'uncaught exception'));
  process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled promise rejection'));
  const daemon = await startDaemon(config, log);
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
    const { command, configPath, overrides } = parseCommandLine(process.argv.slice(2));
    if (command === 'version') {
      process.stdout.write(`minicri ${VERSION}\n`);
      return;
    }
    if (command !== 'serve' && command !== 'config') throw new ConfigError(`unknown command "${command}"\n${USAGE}`);
    const config = loadConfig(configPath, overrides);
    if (command === 'config') process.stdout.write(`${stringify(config)}\n`);
    else await serve(config);
  } catch (err) {
    process.stderr.write(`minicri: ${(err as Error).message}\n`);
    process.exit(err instanceof ConfigError || (err as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? 2 : 1);
  }
}

await main();
