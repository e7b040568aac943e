import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { Deps } from '../../deps.ts';
import { newId } from '../../adapters/ids.ts';
import { ANSWERED_COPY, recordJournaledCopy } from '../messages/transitions.ts';

// Accepted messages whose outcome a stopping worker could not write (docs/decisions.md, "An
// accepted message the database cannot record before the shutdown's deadline"). The database,
// the only place the other workers look, cannot be reached, so the fact goes to a file in the
// data directory, written before the process exits, and the next `serve` of a worker with that
// data directory records them sent before it claims anything.

/** The journal's file in the data directory; a replay renames it to claim it (REPLAYING). */
const FILE = 'unrecorded-sends.jsonl';
const REPLAYING = 'unrecorded-sends.replaying-';

/** One accepted message whose outcome was not written. */
export interface UnrecordedSend {
  messageId: string;
  workerId: string;
  senderAccountId: string;
  /** When the server accepted it (ISO). */
  acceptedAt: string;
  response: string;
  messageIdHeader: string;
  subject: string;
  inReplyTo: string | null;
  references: string | null;
}

/**
 * Appends one message to the journal and flushes it to disk before returning: called as the
 * process gives up on the database, just before it exits. Returns the file's path.
 */
export function journalUnrecorded(dataDir: string, entry: UnrecordedSend): string {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(dataDir, FILE);
  const fd = openSync(file, 'a', 0o600);
  try {
    writeSync(fd, `${JSON.stringify(entry)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return file;
}

/**
 * Records the journal's messages sent (messages/transitions.ts recordJournaledCopy), each in its
 * own transaction, at start, before this worker claims anything. The file is claimed by a rename
 * first, so a process stopping meanwhile appends to a new one; a claimed file left by a replay
 * that stopped half-way is replayed too. A message whose write fails is put back in the journal
 * for the next start. Returns how many were recorded.
 */
export async function replayUnrecorded(deps: Deps, dataDir: string): Promise<number> {
  let names: string[];
  try {
    names = readdirSync(dataDir).filter((n) => n === FILE || n.startsWith(REPLAYING));
  } catch {
    return 0; // no data directory: nothing was journaled
  }
  let recorded = 0;
  for (const name of names) {
    let file = path.join(dataDir, name);
    if (name === FILE) {
      const claimed = path.join(dataDir, `${REPLAYING}${process.pid}.${Date.now()}`);
      try {
        renameSync(file, claimed);
      } catch {
        continue; // another process claimed it first
      }
      file = claimed;
    }
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue; // replayed and removed by another process starting at the same time
    }
    const entries = text
      .split('\n')
      .filter((l) => l.trim())
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as UnrecordedSend];
        } catch {
          deps.log.error({ file, line: l.slice(0, 500) }, 'a line of the unrecorded sends journal cannot be read: skipped');
          return [];
        }
      });
    for (const e of entries) {
      const log = { messageId: e.messageId, workerId: e.workerId, messageIdHeader: e.messageIdHeader, acceptedAt: e.acceptedAt };
      try {
        const now = deps.clock.now();
        const copy = {
          id: e.messageId,
          at: new Date(e.acceptedAt),
          response: e.response,
          messageIdHeader: e.messageIdHeader,
          subject: e.subject,
          inReplyTo: e.inReplyTo,
          references: e.references,
          nextId: newId('msg'),
          eventId: newId('evt'),
        };
        const r = await deps.orm.em.fork().transactional((tx) => recordJournaledCopy(tx, copy, e.senderAccountId, now));
        if (r.recorded) {
          recorded++;
          deps.log.info(log, 'an accepted message its worker could not record before it stopped is recorded sent (from the unrecorded sends journal)');
        } else if (r.state === 'sent' && r.claimedBy !== e.workerId && r.claimedBy !== ANSWERED_COPY) {
          deps.log.error({ ...log, state: r.state }, 'an accepted message of the unrecorded sends journal was sent again meanwhile by another worker: the lead got two copies');
        } else {
          deps.log.info({ ...log, state: r.state }, 'an accepted message of the unrecorded sends journal was already recorded');
        }
      } catch (err) {
        deps.log.error({ ...log, err }, 'recording a message of the unrecorded sends journal failed; it stays in the journal for the next start');
        journalUnrecorded(dataDir, e);
      }
    }
    try {
      unlinkSync(file);
    } catch {
      // replayed by another process starting at the same time: gone already
    }
  }
  return recorded;
}
