import { Migration } from '@mikro-orm/migrations';

/**
 * Prospect threads moved from one SDR to another by an admin
 * (`POST /v1/sdr-profiles/:sdrId/reassign-threads`, docs/sdr-desk.md "Reassigning threads"):
 * one row per thread per move, the history of who held it. The handoff keeps the SDR the reply
 * was first handed to; `prospect_threads.sdr_id` is who holds it now.
 *
 * The SDR mailbox watch reads it: a prospect's answer that arrives in the mailbox of an SDR
 * who once held the thread (it answers that SDR's message) still joins the thread
 * (thread_reassignments_from_idx, by the mailbox's SDR).
 */
export class Migration0031ThreadReassignments extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table thread_reassignments (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      thread_id text not null references prospect_threads(id) on delete cascade,
      from_sdr_id text not null references sdrs(id) on delete cascade,
      to_sdr_id text not null references sdrs(id) on delete cascade,
      drafts_discarded integer not null default 0,
      created_at timestamptz not null
    )`);
    this.addSql(`create index thread_reassignments_thread_idx on thread_reassignments (thread_id, created_at)`);
    this.addSql(`create index thread_reassignments_from_idx on thread_reassignments (from_sdr_id, thread_id)`);
    this.addSql(`create index thread_reassignments_to_idx on thread_reassignments (to_sdr_id)`);
  }
}
