// Read-only operator commands: `list` in each group, and `sender test`. The lists are plain SQL
// on a pg connection (no ORM, no migration run, no secret key) so that they answer as fast as
// node starts; their --json items carry the same fields as the API's views of the same objects
// (test/cli/inspect.test.ts compares them), plus the workspace id and what an operator needs.
import type { Command } from 'commander';
import { ApiError } from '../shared/errors.ts';
import { toIso, isoOrNull } from '../shared/time.ts';
import { nativePlaceholders } from '../db/sql.ts';
import { tallyWindow, usedSql } from '../modules/messages/tallies.ts';
import { EXIT_ERROR, jsonOption, type CliContext, type Query } from './context.ts';

type Row = Record<string, unknown>;

/** `where` for an optional --workspace (id or name); all workspaces without it. */
async function workspaceFilter(query: Query, workspace: string | undefined, column: string, next = 1): Promise<{ where: string; params: unknown[] }> {
  if (workspace === undefined) return { where: '', params: [] };
  const [ws] = await query<{ id: string }>(`select id from workspaces where id = $1 or name = $1`, [workspace]);
  if (!ws) throw ApiError.notFound('workspace', `workspace ${workspace} not found`);
  return { where: `where ${column} = $${next}`, params: [ws.id] };
}

/** A plain text table: a header, then one line per row; `-` for null. */
export function table(rows: Row[], columns: string[]): string {
  if (!rows.length) return '(none)';
  const cell = (v: unknown) => (v === null || v === undefined ? '-' : Array.isArray(v) ? v.join(',') || '-' : String(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  return [line(columns), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))].join('\n');
}

interface ListSpec {
  group: string;
  what: string;
  columns: string[];
  rows(query: Query, workspace: string | undefined): Promise<Row[]>;
}

const LISTS: ListSpec[] = [
  {
    group: 'workspace',
    what: 'workspaces',
    columns: ['id', 'name', 'createdAt'],
    async rows(query) {
      const rows = await query<{ id: string; name: string; created_at: Date }>(`select id, name, created_at from workspaces order by created_at, id`);
      return rows.map((r) => ({ id: r.id, name: r.name, createdAt: toIso(r.created_at) }));
    },
  },
  {
    group: 'key',
    what: 'API keys (never the key itself or its hash)',
    columns: ['id', 'workspaceId', 'name', 'role', 'sdrId', 'createdAt', 'revokedAt', 'lastUsedAt'],
    async rows(query, workspace) {
      const f = await workspaceFilter(query, workspace, 'workspace_id');
      const rows = await query<Row>(
        `select id, workspace_id, name, role, sdr_id, created_at, revoked_at, last_used_at from api_keys ${f.where} order by created_at, id`,
        f.params,
      );
      return rows.map((r) => ({
        id: r.id,
        workspaceId: r.workspace_id,
        name: r.name,
        role: r.role,
        sdrId: r.sdr_id,
        createdAt: toIso(r.created_at as Date),
        revokedAt: isoOrNull(r.revoked_at as Date | null),
        lastUsedAt: isoOrNull(r.last_used_at as Date | null),
      }));
    },
  },
  {
    group: 'sender',
    what: 'sender accounts with their SMTP health and the state of their IMAP watch',
    columns: ['id', 'workspaceId', 'email', 'name', 'status', 'health', 'imapHealth', 'dailyLimit', 'minIntervalSeconds', 'sentLast24h', 'healthError', 'healthRetryAt'],
    async rows(query, workspace) {
      // The window's three parameters come first ($1-$3), the workspace's after them.
      const w = tallyWindow(new Date());
      const f = await workspaceFilter(query, workspace, 's.workspace_id', 4);
      const rows = await query<Row>(
        `select s.id, s.workspace_id, s.email, s.name, s.status, s.health, s.health_error, s.health_retry_at, s.daily_limit, s.min_interval_ms,
                (select w.status from mailbox_watches w where w.sender_account_id = s.id limit 1) as imap_health,
                -- The dashboard's sender usage (messages/activity.ts sentLast24hByAccount, senders/repository.ts poolsOfAccounts), on a bare connection.
                ${nativePlaceholders(usedSql('s.id', 'sender_account_id'))} as sent,
                coalesce((select array_agg(pm.pool_id order by pm.added_at, pm.seq) from pool_members pm where pm.sender_account_id = s.id), '{}') as pools
           from sender_accounts s ${f.where}
          order by s.created_at, s.id`,
        [w.edgeEnd, w.since, w.edgeEnd, ...f.params],
      );
      return rows.map((r) => ({
        id: r.id,
        workspaceId: r.workspace_id,
        email: r.email,
        name: r.name,
        status: r.status,
        health: r.health,
        imapHealth: r.imap_health ?? null,
        dailyLimit: r.daily_limit,
        minIntervalSeconds: Number(r.min_interval_ms) / 1000,
        healthError: r.health_error,
        healthRetryAt: isoOrNull(r.health_retry_at as Date | null),
        sentLast24h: Number(r.sent),
        poolIds: r.pools as string[],
      }));
    },
  },
  {
    group: 'pool',
    what: 'sender pools with their members and what they may still send in the rolling 24 hours',
    columns: ['id', 'workspaceId', 'name', 'dailyCapacity', 'remainingToday', 'senderCount', 'senderAccountIds'],
    async rows(query, workspace) {
      const w = tallyWindow(new Date());
      const f = await workspaceFilter(query, workspace, 'p.workspace_id', 4);
      // The statement of senders/repository.ts listPoolsWithUsage, on a bare connection.
      const rows = await query<Row>(
        `select p.id, p.workspace_id, p.name, p.daily_capacity,
                ${nativePlaceholders(usedSql('p.id', 'pool_id'))} as sent,
                coalesce((select array_agg(pm.sender_account_id order by pm.added_at, pm.seq)
                            from pool_members pm where pm.pool_id = p.id), '{}') as members
           from sender_pools p ${f.where}
          order by p.created_at, p.id`,
        [w.edgeEnd, w.since, w.edgeEnd, ...f.params],
      );
      return rows.map((r) => {
        const remaining = Math.max(0, (r.daily_capacity as number) - Number(r.sent));
        const members = r.members as string[];
        return {
          id: r.id,
          workspaceId: r.workspace_id,
          name: r.name,
          dailyCapacity: r.daily_capacity,
          remainingVolume: remaining,
          remainingToday: remaining,
          senderAccountIds: members,
          senderCount: members.length,
        };
      });
    },
  },
  {
    group: 'sdr',
    what: 'SDRs, active or not, with their mail connection',
    columns: ['id', 'workspaceId', 'name', 'email', 'active', 'mailConnected', 'mailEmail', 'mailHealth'],
    async rows(query, workspace) {
      const f = await workspaceFilter(query, workspace, 's.workspace_id');
      const rows = await query<Row>(
        `select s.id, s.workspace_id, s.name, s.email, s.active, m.email as mail_email, m.health_state
           from sdrs s left join sdr_mailboxes m on m.sdr_id = s.id ${f.where}
          order by s.created_at, s.id`,
        f.params,
      );
      return rows.map((r) => {
        const connected = r.health_state === 'active';
        return {
          id: r.id,
          workspaceId: r.workspace_id,
          name: r.name,
          email: r.email,
          active: r.active,
          mailConnected: connected,
          mailEmail: connected ? r.mail_email : null,
          mailHealth: r.health_state ?? null,
        };
      });
    },
  },
];

function group(program: Command, name: string): Command {
  const found = program.commands.find((c) => c.name() === name);
  if (!found) throw new Error(`no command group ${name}`);
  return found;
}

type ProbeResult = { ok: true } | { ok: false; kind: string; error: string };

function probeText(name: string, r: ProbeResult | null): string {
  if (!r) return `${name}: not configured`;
  return r.ok ? `${name}: ok` : `${name}: FAILED (${r.kind}) ${r.error}`;
}

export function registerInspectCommands(program: Command, ctx: CliContext) {
  for (const spec of LISTS) {
    const cmd = group(program, spec.group).command('list').description(`list ${spec.what}`);
    if (spec.group !== 'workspace') cmd.option('--workspace <workspace>', 'only this workspace (id or name); default: every workspace');
    jsonOption(cmd).action(async (opts: { workspace?: string; json?: boolean }) => {
      const data = await ctx.withQuery((query) => spec.rows(query, opts.workspace));
      ctx.print(opts, { data }, table(data, spec.columns));
    });
  }

  jsonOption(
    group(program, 'sender')
      .command('test')
      .description("log in to the account's SMTP and IMAP servers now and print the outcome (exit 1 if a check fails)")
      .argument('<id>', 'sender account id'),
  ).action(async (id: string, opts: { json?: boolean }) => {
    const result = await ctx.withServices((services) => services.senders.testConnection(id));
    const ok = result.smtp.ok && (result.imap?.ok ?? true);
    if (!ok) ctx.setExitCode(EXIT_ERROR);
    ctx.print(opts, { ...result, ok }, [`sender ${result.email} (${result.id})`, probeText('smtp', result.smtp), probeText('imap', result.imap)].join('\n'));
  });
}
