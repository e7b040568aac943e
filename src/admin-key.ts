// The first-start admin key. stdout is the JSON log stream (one object per line, read by
// `docker logs` and log shippers), so the key never goes into it as a bare line and never into
// a log record: a terminal gets the banner; without one, a file only the daemon's user can read.
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Config } from './config/index.ts';
import type { Logger } from './adapters/logger.ts';

export interface TerminalIO {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
}

export const ADMIN_KEY_FILE = 'admin-api-key';

const LOST = 'if it is lost, create another with `mailgate key create --workspace default --role admin`';

export function announceAdminKey(created: { key: string; workspaceId: string }, config: Config, log: Logger, io: TerminalIO): void {
  const terminal = io.stdout.isTTY ? io.stdout : io.stderr.isTTY ? io.stderr : undefined;
  if (terminal) {
    terminal.write(
      `\nmailgate: first start. Created workspace "default" (${created.workspaceId}) and its admin API key.\n` +
        `mailgate: ADMIN API KEY (shown only this once; store it now): ${created.key}\n\n`,
    );
    log.info({ workspaceId: created.workspaceId }, `first start: created workspace "default" and its admin API key, shown on the terminal; ${LOST}`);
    return;
  }
  const file = path.join(config.dataDir, ADMIN_KEY_FILE);
  try {
    mkdirSync(config.dataDir, { recursive: true });
    // A fresh file ('wx' after removal): never written through a link left in its place.
    rmSync(file, { force: true });
    writeFileSync(file, created.key + '\n', { mode: 0o600, flag: 'wx' });
    log.info({ workspaceId: created.workspaceId, file }, `first start: created workspace "default" and its admin API key; the key is in the file (mode 0600): store it and delete the file; ${LOST}`);
  } catch (err) {
    log.error({ workspaceId: created.workspaceId, file, error: (err as Error).message }, `first start: created workspace "default" and its admin API key, but could not write the key to the file; ${LOST}`);
  }
}

/**
 * At a later start: the file the first start wrote the key to is still there. The README says to
 * store the key and delete the file; a start reminds of it (once per start, at warn), never
 * reading or logging the key.
 */
export function remindOfAdminKeyFile(config: Config, log: Logger): void {
  const file = path.join(config.dataDir, ADMIN_KEY_FILE);
  if (existsSync(file)) log.warn({ file }, `the file still holds the first start's admin API key: store it and delete the file`);
}
