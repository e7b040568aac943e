// What every command group of the CLI shares: its context (config, output, a unit of work on the
// database), exit codes and option helpers. program.ts wires the groups; they import this file,
// never program.ts, so the CLI's modules depend one way.
import { CommanderError, Option, type Command } from 'commander';
import type { Config } from '../config/index.ts';
import type { Logger } from '../adapters/logger.ts';
import type { Services } from '../services.ts';
import type { Deps } from '../deps.ts';
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
  /**
   * Opens the database (starting embedded PostgreSQL if needed), runs fn, closes. An embedded
   * database that does not exist yet in the data dir is refused in one line naming the directory
   * (MAILGATE_DATA_DIR defaults to ./data of the working directory), unless `createDatabase`
   * (workspace create): then it is created, with a warning on stderr.
   */
  withServices<T>(fn: (services: Services, deps: Deps) => Promise<T>, opts?: { createDatabase?: boolean }): Promise<T>;
  /**
   * Read-only queries without the ORM: straight to the database the daemon uses (DATABASE_URL,
   * or the embedded cluster running in the data dir). Only when no cluster runs does it start
   * one (and apply migrations) the way withServices does; it never creates one.
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

/** A whole-number option within [min, max] (max defaults to what a PostgreSQL integer holds). */
export function intArg(name: string, min = 0, max = 2_147_483_647) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max)
      throw usageError(`${name} must be a whole number from ${min.toLocaleString('en-US')} to ${max.toLocaleString('en-US')}`);
    return Number(value);
  };
}
