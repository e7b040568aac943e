// Start-up cost is the CLI's whole cost: this file and the register* modules import only
// commander and small modules; the ORM, the app, mail parsing and the daemon are imported inside
// the actions that use them (docs/benchmarks.md, CLI and restart).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Command, CommanderError } from 'commander';
import type { Config } from '../config/index.ts';
import { ApiError, StartupError } from '../shared/errors.ts';
import { refusedArgument } from './input.ts';
import { EXIT_OK, EXIT_ERROR, EXIT_USAGE, type CliIO, type CliContext, type Query } from './context.ts';
import { registerWorkspaceCommands } from './workspace.ts';
import { registerSenderCommands } from './sender.ts';
import { registerSdrCommands } from './sdr.ts';
import { registerIcpCommands } from './icp.ts';
import { registerFollowupCommands } from './followup.ts';
import { registerSuppressionCommands } from './suppression.ts';
import { registerReplyCommands } from './reply.ts';
import { registerServeCommands } from './serve.ts';
import { registerClassifyCommands } from './classify.ts';
import { registerKbCommands } from './kb.ts';
import { registerCampaignCommands } from './campaign.ts';
import { registerInspectCommands } from './inspect.ts';
import { registerDevSinkCommands } from './dev-sink.ts';

export type { CliIO, CliContext, Query };

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
    async withServices(fn, opts) {
      const cfg = ctx.config();
      if (!cfg.databaseUrl) {
        // No database in the data dir: from another directory (MAILGATE_DATA_DIR defaults to
        // ./data of the working directory) a command made a new, empty one, then failed on the
        // workspace it names (or listed nothing). Only `workspace create` may start one.
        const { EmbeddedDatabase } = await import('../db/embedded.ts');
        if (!EmbeddedDatabase.runningUrl(cfg.dataDir) && !embeddedExists(cfg.dataDir)) {
          if (!opts?.createDatabase) throw new StartupError(noDatabase(cfg.dataDir, io.env));
          io.stderr.write(`warning: created a new, empty mailgate database in ${path.join(cfg.dataDir, 'pg')} (${dataDirOrigin(io.env)}); if the daemon runs elsewhere, set MAILGATE_DATA_DIR to its data dir\n`);
        }
      }
      const [{ openRuntime }, { createServices }] = await Promise.all([import('../runtime.ts'), import('../services.ts')]);
      const runtime = await openRuntime(cfg, await ctx.logger(), { mailProbe: io.mailProbe, poolMax: 2 });
      const release = closeOnSignal(() => runtime.close());
      try {
        return await fn(createServices(runtime.deps, runtime.deps.orm.em.fork()), runtime.deps);
      } finally {
        release();
        await runtime.close();
      }
    },
    async withQuery(fn) {
      const cfg = ctx.config();
      const { EmbeddedDatabase } = await import('../db/embedded.ts');
      const url = cfg.databaseUrl ?? EmbeddedDatabase.runningUrl(cfg.dataDir);
      if (url) return queryOn(url, fn);
      // A list never creates the database: from another directory (MAILGATE_DATA_DIR defaults to
      // ./data of the working directory) it made a new, empty one and listed nothing.
      if (!embeddedExists(cfg.dataDir)) throw new StartupError(noDatabase(cfg.dataDir, io.env));
      const { openDatabase } = await import('../db/database.ts');
      const db = await openDatabase(cfg, await ctx.logger(), { poolMax: 1 });
      const release = closeOnSignal(() => db.close());
      try {
        return await queryOn(db.url, fn);
      } finally {
        release();
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
  registerReplyCommands(program, ctx);
  registerClassifyCommands(program, ctx);
  registerKbCommands(program, ctx);
  registerCampaignCommands(program, ctx);
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
    // A value the command itself refused (the API's 400 invalid_request: an address that is
    // not one, an unknown ICP value, neither --file nor --text) is a malformed argument, a usage
    // error like one the option parser refuses (README: exit 2).
    // (By its code, not instanceof: a test runner may load errors.ts twice, ESM and CJS.)
    if ((err as { code?: unknown } | null)?.code === 'invalid_request') return EXIT_USAGE;
    return EXIT_ERROR;
  }
}

function embeddedExists(dataDir: string): boolean {
  return existsSync(path.join(dataDir, 'pg', 'PG_VERSION'));
}

function dataDirOrigin(env: NodeJS.ProcessEnv): string {
  return env.MAILGATE_DATA_DIR ? 'MAILGATE_DATA_DIR' : 'MAILGATE_DATA_DIR unset: ./data of the working directory';
}

function noDatabase(dataDir: string, env: NodeJS.ProcessEnv): string {
  return (
    `no mailgate database in ${path.join(dataDir, 'pg')} (${dataDirOrigin(env)}): ` +
    'set MAILGATE_DATA_DIR to the daemon\'s data dir (or DATABASE_URL), or run from the directory the daemon runs in; `mailgate serve` (or `workspace create`) creates a new one'
  );
}

function packageVersion(): string {
  // package.json is two levels up from src/cli/ and from dist/cli/ alike.
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/**
 * While a command holds the database, Ctrl-C or SIGTERM closes it before the process ends: an
 * embedded cluster the command started is stopped (or left to the processes still using it),
 * instead of running on with no owner (it runs detached). Returns the function that removes
 * the handlers.
 */
function closeOnSignal(close: () => Promise<void>): () => void {
  const handlers = (['SIGINT', 'SIGTERM'] as const).map((signal) => {
    const handler = () => {
      void close()
        .catch(() => {})
        .finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
    };
    process.once(signal, handler);
    return () => process.off(signal, handler);
  });
  return () => handlers.forEach((off) => off());
}

async function queryOn<T>(url: string, fn: (query: Query) => Promise<T>): Promise<T> {
  // With the start's time limit and its one line naming DATABASE_URL (a server that accepts
  // and never answers hung a list command for ever; a refused one printed the driver's words).
  const { connectChecked } = await import('../db/database.ts');
  const client = await connectChecked(url);
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
