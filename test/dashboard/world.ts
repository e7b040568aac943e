// The dashboard HTTP tests' world: the app on a fresh database, a pg client on it and, when the
// tests need a mailbox, a real SMTP server (smtp-server) and Dovecot with one user on both.
// Call it inside a describe: it registers its own hooks.
import pg from 'pg';
import { startTestApp, type TestApp } from '../support/harness.ts';
import type { Config } from '../../src/config/index.ts';
import { ImapTestServer } from '../support/dovecot.ts';
import { SmtpSink } from '../support/smtp.ts';

export interface DashboardWorld {
  app: TestApp;
  db: pg.Client;
  imap: ImapTestServer;
  smtp: SmtpSink;
}

export function dashboardWorld(opts: { config?: Partial<Record<keyof Config, unknown>>; mailbox?: { user: string; imapPass: string; smtpPass: string } } = {}): DashboardWorld {
  const w = { imap: new ImapTestServer(), smtp: new SmtpSink() } as DashboardWorld;
  before(async () => {
    if (opts.mailbox) {
      await Promise.all([w.imap.start(), w.smtp.start()]);
      w.imap.addUser(opts.mailbox.user, opts.mailbox.imapPass);
      w.smtp.users.set(opts.mailbox.user, opts.mailbox.smtpPass);
    }
    w.app = await startTestApp({ config: opts.config });
    w.db = new pg.Client({ connectionString: w.app.databaseUrl });
    await w.db.connect();
  });
  after(async () => {
    await w.db.end();
    await w.app.close();
    if (opts.mailbox) {
      await w.imap.stop();
      await w.smtp.stop();
    }
  });
  return w;
}
