// Sets an SDR mailbox's health straight in the database and keeps it there while a test's
// request runs. A running mailbox watcher writes the health when a session logs in (the first
// tick after a mailbox is connected, 300 ms in the desk tests; every connectMail starts a new
// session) and when one fails, so it could set `active` again before the request read it (a CI
// run under load did): the row stays locked by a second connection, with the state committed,
// until `release()`. Requests read the row without a lock; the watcher's write waits for it.
import pg from 'pg';
import { waitFor } from './wait.ts';

export interface HeldMailboxHealth {
  /** Lets the watcher write again and puts the mailbox back to `active`. */
  release(): Promise<void>;
}

export async function holdMailboxHealth(databaseUrl: string, sdrId: string, state: string): Promise<HeldMailboxHealth> {
  const hold = new pg.Client({ connectionString: databaseUrl });
  await hold.connect();
  try {
    await waitFor(`${state} committed and the mailbox row held`, async () => {
      await hold.query(`update sdr_mailboxes set health_state = $2 where sdr_id = $1`, [sdrId, state]);
      await hold.query('begin');
      const [row] = (await hold.query(`select health_state from sdr_mailboxes where sdr_id = $1 for no key update`, [sdrId])).rows;
      if (row?.health_state === state) return true;
      await hold.query('rollback');
      return false;
    });
  } catch (err) {
    await hold.end();
    throw err;
  }
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      try {
        await hold.query(`update sdr_mailboxes set health_state = 'active' where sdr_id = $1`, [sdrId]);
        await hold.query('commit');
      } finally {
        await hold.end();
      }
    },
  };
}
