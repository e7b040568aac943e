// Start-up cost is the CLI's whole cost: this file and the register* modules import only
// commander and small modules; the ORM, the app, mail parsing and the daemon are imported inside
// the actions that use them (docs/benchmarks.md, CLI and restart).
import { readFileSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import type { Config } from '../config/index.ts';
import type { Logger } from '../adapters/logger.ts';
import { ApiError, StartupError } from '../shared/errors.ts';
import { refusedArgument } from './input.ts';
import type { Services } from '../services.ts';
import type { Deps } from '../deps.ts';
import { registerWorkspaceCommands } from './workspace.ts';
import { registerSenderCommands } from './sender.ts';
import { registerSdrCommands } from './sdr.ts';
import { registerIcpCommands } from './icp.ts';
import { registerFollowupCommands } from './followup.ts';
import { registerSuppressionCommands } from './suppression.ts';
import { registerServeCommands } from './serve.ts';
import { registerClassifyCommands } from './classify.ts';
import { registerKbCommands } from './kb.ts';
import { registerInspectCommands } from './inspect.ts';
import { registerDevSinkCommands } from './dev-sink.ts';
import type { MailProbe } from '../adapters/mailprobe.ts';

export interface CliIO {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
  /** Tests inject a mail probe; the real one talks to the servers. */
  mailProbe?: MailProbe;
}

/** What every command group gets: config, output, and a unit of work on the database. */
export interface CliContext {
  io: CliIO;
  config(): Config;
  /** A logger for a one-shot command (pino is loaded on first use: most commands never log). */
  logger(level?: string): Promise<Logger>;
  /** Opens the database (starting embedded PostgreSQL if needed), runs fn, closes. */
  withServices<T>(fn: (services: Services, deps: Deps) => Promise<T>): Promise<T>;
  /**
   * Read-only queries without the ORM: straight to the database the daemon uses (DATABASE_URL,
   * or the embedded cluster running in the data dir). Only when no cluster runs does it start
   * one (and apply migrations) the way withServices does.
   */
  withQuery<T>(fn: (query: Query) => Promise<T>): Promise<T>;
  /** Prints one JSON object with --json, else the human text. */
  print(opts: { json?: boolean }, value: unknown, human: string): void;
  /** The exit code when the command itself completes but reports a failure (sender test). */
  setExitCode(code: number): void;
}

/** A parameterised statement ($1, $2, ...) and its rows. */
export type Query = <T = Record<string, unknown>>(text: string, params?: unknown[]) => Promise<T[]>;

export const EXIT_OK = 0;
export const EXIT_ERROR = 1;
export const EXIT_USAGE = 2;

/** A bad option or argument value: exit 2 like commander's own usage errors. */
export function usageError(message: string): CommanderError {
  return new CommanderError(EXIT_USAGE, 'mailgate.invalidArgument', message);
}

/** Adds --json to a leaf command (every command accepts it). */
export function jsonOption(cmd: Command): Command {
  return cmd.addOption(new Option('--json', 'print exactly one JSON object on stdout'));
}

export function intArg(name: string, min = 0) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < min) throw usageError(`${name} must be a whole number >= ${min}`);
    return Number(value);
  };
}

/** Runs the CLI. Returns the exit code, or null for `serve` (which keeps running). */
export async function runCli(argv: string[], io: CliIO): Promise<number | null> {
  let config: Config | undefined;
  let exitCode = EXIT_OK;
  // Loaded before any action runs (zod), not for --help or --version; pino only when a command logs.
  let configModule: typeof import('../config/index.ts') | undefined;
  let loggerModule: typeof import('../adapters/logger.ts') | undefined;
  const ctx: CliContext = {
    io,
    config() {
      config ??= configModule!.loadConfig(io.env);
      return config;
    },
    async logger(level) {
      // Command output owns stdout; logs of one-shot commands go to stderr, warnings only.
      loggerModule ??= await import('../adapters/logger.ts');
      return loggerModule.createLogger(level ?? 'warn', io.stderr);
    },
    async withServices(fn) {
      const cfg = ctx.config();
      const [{ openRuntime }, { createServices }] = await Promise.all([import('../runtime.ts'), import('../services.ts')]);
      const runtime = await openRuntime(cfg, await ctx.logger(), { mailProbe: io.mailProbe, poolMax: 2 });
      try {
        return await fn(createServices(runtime.deps, runtime.deps.orm.em.fork()), runtime.deps);
      } finally {
        await runtime.close();
      }
    },
    async withQuery(fn) {
      const cfg = ctx.config();
      const { EmbeddedDatabase } = await import('../db/embedded.ts');
      const url = cfg.databaseUrl ?? EmbeddedDatabase.runningUrl(cfg.dataDir);
      if (url) return queryOn(url, fn);
      const { openDatabase } = await import('../db/database.ts');
      const db = await openDatabase(cfg, await ctx.logger(), { poolMax: 1 });
      try {
        return await queryOn(db.url, fn);
      } finally {
        await db.close();
      }
    },
    print(opts, value, human) {
      io.stdout.write(opts.json ? JSON.stringify(value) + '\n' : human + '\n');
    },
    setExitCode(code) {
      exitCode = code;
    },
  };

  let keepRunning = false;
  const program = new Command('mailgate')
    .description('Outbound email campaigns and the SDR reply workflow')
    .version(packageVersion(), '-V, --version', 'print the version')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
    })
    .showHelpAfterError(false)
    .hook('preAction', async () => {
      configModule = await import('../config/index.ts');
    });

  registerServeCommands(program, ctx, () => {
    keepRunning = true;
  });
  registerWorkspaceCommands(program, ctx);
  registerSenderCommands(program, ctx);
  registerSdrCommands(program, ctx);
  registerIcpCommands(program, ctx);
  registerFollowupCommands(program, ctx);
  registerSuppressionCommands(program, ctx);
  registerClassifyCommands(program, ctx);
  registerKbCommands(program, ctx);
  registerDevSinkCommands(program, ctx, () => {
    keepRunning = true;
  });
  // After the groups it adds `list` (and `sender test`) to.
  registerInspectCommands(program, ctx);

  for (const cmd of program.commands) cmd.exitOverride();

  const refused = refusedArgument(argv);
  if (refused) {
    io.stderr.write(`error: ${refused}\n`);
    return 2;
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
    return keepRunning ? null : exitCode;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return EXIT_OK;
      // `mailgate help` exits 0; help printed because a command was missing is a usage error.
      if (err.code === 'commander.help') return err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
      // commander already printed its message for its own errors, all of them usage errors.
      if (err.code === 'mailgate.invalidArgument') io.stderr.write(`error: ${err.message}\n`);
      return EXIT_USAGE;
    }
    io.stderr.write(`error: ${oneLine(err, configModule?.ConfigError)}\n`);
    // The stack is for developers: only when asked for with LOG_LEVEL=debug (or trace).
    const level = config?.logLevel ?? io.env.LOG_LEVEL;
    if ((level === 'debug' || level === 'trace') && err instanceof Error && err.stack) io.stderr.write(err.stack + '\n');
    return EXIT_ERROR;
  }
}

function packageVersion(): string {
  // package.json is two levels up from src/cli/ and from dist/cli/ alike.
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

async function queryOn<T>(url: string, fn: (query: Query) => Promise<T>): Promise<T> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(async (text, params = []) => {
      try {
        return (await client.query(text, params)).rows;
      } catch (err) {
        // undefined_table / undefined_column: a database this version has not migrated yet.
        const code = (err as { code?: string }).code;
        if (code === '42P01' || code === '42703') throw new Error(`the database is not migrated to this version of mailgate (${(err as Error).message}): run \`mailgate migrate\``);
        throw err;
      }
    });
  } finally {
    await client.end();
  }
}

function oneLine(err: unknown, configError?: new (...args: never[]) => Error): string {
  if (err instanceof ApiError || err instanceof StartupError || (configError && err instanceof configError)) return err.message.replace(/\s*\n\s*/g, ' ');
  const e = err as Error;
  return (e?.message || String(err)).split('\n')[0];
}
