import type { Command } from 'commander';
import { Option } from 'commander';
import { jsonOption, type CliContext } from './context.ts';
import type { Role, RunningDaemon } from '../main.ts';

export function registerServeCommands(program: Command, ctx: CliContext, keepRunning: () => void) {
  program
    .command('serve')
    .description('run the daemon: HTTP API and background workers')
    .addOption(new Option('--role <role>', 'api, worker, or all').choices(['all', 'api', 'worker']).default('all'))
    .action(async (opts: { role: Role }) => {
      const config = ctx.config();
      // Imported here, not at the top: no other command pays for loading the daemon.
      const [{ serve, StartAborted }, { createLogger }, { applyHeapPolicy }] = await Promise.all([
        import('../main.ts'),
        import('../adapters/logger.ts'),
        import('../adapters/heap.ts'),
      ]);
      // Before the daemon allocates: its old generation collected at 1.5x what was live.
      applyHeapPolicy();
      const log = createLogger(config.logLevel, ctx.io.stdout);
      // Signals are ours from the first moment and stay ours: a SIGTERM while starting stops
      // what has started, and a repeated one does not cut a drain short (the embedded
      // PostgreSQL runs in its own process group and would outlive a plain exit). The drain is
      // bounded by MAILGATE_SHUTDOWN_TIMEOUT; SIGKILL remains the way to stop at once.
      const starting = new AbortController();
      let daemon: RunningDaemon | undefined;
      for (const signal of ['SIGTERM', 'SIGINT'] as const) {
        process.on(signal, () => {
          if (!daemon) return starting.abort();
          daemon.shutdown(signal).then(
            () => process.exit(0),
            (err) => {
              log.error({ err }, 'shutdown failed');
              process.exit(1);
            },
          );
        });
      }
      try {
        daemon = await serve(config, log, opts.role, { stdout: ctx.io.stdout, stderr: ctx.io.stderr }, starting.signal);
      } catch (err) {
        if (err instanceof StartAborted) return;
        throw err;
      }
      keepRunning();
    });

  jsonOption(program.command('migrate').description('apply pending database migrations')).action(async (opts: { json?: boolean }) => {
    const config = ctx.config();
    const [{ openDatabase }, { migrate }] = await Promise.all([import('../db/database.ts'), import('../db/orm.ts')]);
    const db = await openDatabase(config, await ctx.logger(), { migrate: false, poolMax: 2 });
    try {
      const applied = await migrate(db.orm, db.url);
      ctx.print(opts, { applied }, applied.length ? `applied ${applied.join(', ')}` : 'database is up to date');
    } finally {
      await db.close();
    }
  });
}
