// `mailgate dev-sink`: a local stand-in for a mail provider and a webhook receiver, so the README's
// walkthrough runs on a fresh clone without a real mailbox or a public HTTPS endpoint
// (docs/decisions.md, "The local dev sink"). The servers live in dev-sink-server.ts, imported by
// the action only: the CLI's other commands do not load them.
import path from 'node:path';
import type { Command } from 'commander';
import { Option } from 'commander';
import { intArg, type CliContext } from './context.ts';

export const DEV_SINK_DEFAULTS = { smtpPort: 2525, httpsPort: 8025 };

export function registerDevSinkCommands(program: Command, ctx: CliContext, keepRunning: () => void) {
  program
    .command('dev-sink')
    .description('local SMTP server (any login) and HTTPS webhook receiver that record what they get; for trying mailgate, never for production')
    .addOption(new Option('--smtp-port <n>', 'SMTP port').argParser(intArg('--smtp-port', 0, 65_535)).env('MAILGATE_DEV_SINK_SMTP_PORT').default(DEV_SINK_DEFAULTS.smtpPort))
    .addOption(new Option('--https-port <n>', 'HTTPS webhook receiver port').argParser(intArg('--https-port', 0, 65_535)).env('MAILGATE_DEV_SINK_HTTPS_PORT').default(DEV_SINK_DEFAULTS.httpsPort))
    .addOption(new Option('--dir <dir>', 'where messages, events and the certificates go (default: MAILGATE_DATA_DIR/dev-sink)'))
    .action(async (opts: { smtpPort: number; httpsPort: number; dir?: string }) => {
      const dir = path.resolve(opts.dir ?? path.join(ctx.config().dataDir, 'dev-sink'));
      const { startDevSink } = await import('./dev-sink-server.ts');
      const sink = await startDevSink({ dir, smtpPort: opts.smtpPort, httpsPort: opts.httpsPort, out: ctx.io.stdout });
      for (const signal of ['SIGTERM', 'SIGINT'] as const) {
        process.on(signal, () => {
          sink.close().then(
            () => process.exit(0),
            () => process.exit(1),
          );
        });
      }
      keepRunning();
    });
}
