import type { Command } from 'commander';
import { Option } from 'commander';
import { jsonOption, type CliContext } from './program.ts';
import type { Role } from '../main.ts';

export function registerServeCommands(program: Command, ctx: CliContext, keepRunning: () => void) {
  program
    .command('serve')
    .description('run the daemon: HTTP API and background workers')
    .addOption(new Option('--role <role>', 'api, worker, or all').choices(['all', 'api', 'worker']).default('all'))
    .action(async (opts: { role: Role }) => {
      const config = ctx.config();
      // Imported here, not at the top: no other command pays for loading the daemon.
      const [{ serve }, { createLogger }] = await Promise.all([import('../main.ts'), import('../adapters/logger.ts')]);
      const log = createLogger(config.logLevel, ctx.io.stdout);
      const daemon = await serve(config, log, opts.role, ctx.io.stdout);
      keepRunning();
      for (const signal of ['SIGTERM', 'SIGINT'] as const) {
        process.once(signal, () => {
          daemon.shutdown(signal).then(
            () => process.exit(0),
            (err) => {
              log.error({ err }, 'shutdown failed');
              process.exit(1);
            },
          );
        });
      }
    });

  jsonOption(program.command('migrate').description('apply pending database migrations')).action(async (opts: { json?: boolean }) => {
    const config = ctx.config();
    const [{ openDatabase }, { migrate }] = await Promise.all([import('../db/database.ts'), import('../db/orm.ts')]);
    const db = await openDatabase(config, ctx.logger(), { migrate: false, poolMax: 2 });
    try {
      const applied = await migrate(db.orm, db.url);
      ctx.print(opts, { applied }, applied.length ? `applied ${applied.join(', ')}` : 'database is up to date');
    } finally {
      await db.close();
    }
  });
}
