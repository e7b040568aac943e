import { Command, CommanderError, Option } from 'commander';
import { loadConfig, ConfigError, type Config } from '../config/index.ts';
import { createLogger, type Logger } from '../adapters/logger.ts';
import { ApiError, StartupError } from '../shared/errors.ts';
import { openRuntime } from '../runtime.ts';
import { createServices, type Services, type Deps } from '../services.ts';
import { registerWorkspaceCommands } from './workspace.ts';
import { registerSenderCommands } from './sender.ts';
import { registerSdrCommands } from './sdr.ts';
import { registerIcpCommands } from './icp.ts';
import { registerFollowupCommands } from './followup.ts';
import { registerSuppressionCommands } from './suppression.ts';
import { registerServeCommands } from './serve.ts';
import { registerClassifyCommands } from './classify.ts';
import { registerKbCommands } from './kb.ts';
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
  logger(level?: string): Logger;
  /** Opens the database (starting embedded PostgreSQL if needed), runs fn, closes. */
  withServices<T>(fn: (services: Services, deps: Deps) => Promise<T>): Promise<T>;
  /** Prints one JSON object with --json, else the human text. */
  print(opts: { json?: boolean }, value: unknown, human: string): void;
}

/** Adds --json to a leaf command (every command accepts it). */
export function jsonOption(cmd: Command): Command {
  return cmd.addOption(new Option('--json', 'print exactly one JSON object on stdout'));
}

export function intArg(name: string, min = 0) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < min) throw new CommanderError(2, 'mailgate.invalidArgument', `${name} must be a whole number >= ${min}`);
    return Number(value);
  };
}

/** Runs the CLI. Returns the exit code, or null for `serve` (which keeps running). */
export async function runCli(argv: string[], io: CliIO): Promise<number | null> {
  let config: Config | undefined;
  const ctx: CliContext = {
    io,
    config() {
      config ??= loadConfig(io.env);
      return config;
    },
    logger(level) {
      // Command output owns stdout; logs of one-shot commands go to stderr, warnings only.
      return createLogger(level ?? 'warn', io.stderr);
    },
    async withServices(fn) {
      const cfg = ctx.config();
      const runtime = await openRuntime(cfg, ctx.logger(), { mailProbe: io.mailProbe, poolMax: 2 });
      try {
        return await fn(createServices(runtime.deps, runtime.deps.orm.em.fork()), runtime.deps);
      } finally {
        await runtime.close();
      }
    },
    print(opts, value, human) {
      io.stdout.write(opts.json ? JSON.stringify(value) + '\n' : human + '\n');
    },
  };

  let keepRunning = false;
  const program = new Command('mailgate')
    .description('Outbound email campaigns and the SDR reply workflow')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
    })
    .showHelpAfterError(false);

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

  for (const cmd of program.commands) cmd.exitOverride();

  try {
    await program.parseAsync(argv, { from: 'user' });
    return keepRunning ? null : 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.help' || err.code === 'commander.version') return 0;
      // commander already printed its message for its own errors.
      if (err.code === 'mailgate.invalidArgument') io.stderr.write(`error: ${err.message}\n`);
      return err.exitCode || 2;
    }
    io.stderr.write(`error: ${oneLine(err)}\n`);
    // The stack is for developers: only when asked for with LOG_LEVEL=debug (or trace).
    const level = config?.logLevel ?? io.env.LOG_LEVEL;
    if ((level === 'debug' || level === 'trace') && err instanceof Error && err.stack) io.stderr.write(err.stack + '\n');
    return 1;
  }
}

function oneLine(err: unknown): string {
  if (err instanceof ApiError || err instanceof ConfigError || err instanceof StartupError) return err.message.replace(/\s*\n\s*/g, ' ');
  const e = err as Error;
  return (e?.message || String(err)).split('\n')[0];
}
