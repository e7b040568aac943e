import type { Command } from 'commander';
import { parseDuration } from '../shared/duration.ts';
import { intArg, jsonOption, usageError, type CliContext } from './context.ts';
import { SENDER_LIMITS } from '../modules/senders/limits.ts';

function durationArg(value: string): number {
  let ms: number;
  try {
    ms = parseDuration(value);
  } catch (err) {
    throw usageError(`--min-interval: ${(err as Error).message}`);
  }
  if (ms > SENDER_LIMITS.minIntervalSeconds * 1000) throw usageError('--min-interval: must be at most 24h');
  return ms;
}

/** `--daily-limit`: a whole number, or `none` for no limit (kept as the word: commander turns a parsed null into ''). */
function dailyLimitArg(value: string): number | 'none' {
  return value === 'none' ? value : intArg('--daily-limit', 1, SENDER_LIMITS.dailyLimit)(value);
}

export function registerSenderCommands(program: Command, ctx: CliContext) {
  const sender = program.command('sender').description('sender accounts');
  jsonOption(
    sender
      .command('add')
      .description('add a sender account')
      .requiredOption('--workspace <workspace>', 'workspace id or name')
      .requiredOption('--email <email>', 'From address')
      .requiredOption('--name <name>', 'display name in the From header')
      .requiredOption('--smtp <url>', 'smtp://user:pass@host:port or smtps://...')
      .option('--imap <url>', 'imap://user:pass@host:port or imaps://...')
      .option('--pool <poolId>', 'add the account to this pool')
      .option('--daily-limit <n>', 'most messages in any 24 hours', intArg('--daily-limit', 1, SENDER_LIMITS.dailyLimit))
      .option('--min-interval <duration>', 'least time between two sends, e.g. 30s', durationArg),
  ).action(
    async (opts: { workspace: string; email: string; name: string; smtp: string; imap?: string; pool?: string; dailyLimit?: number; minInterval?: number; json?: boolean }) => {
      const s = await ctx.withServices(async (services) => {
        const ws = await services.workspaces.resolve(opts.workspace);
        return services.senders.add({
          workspaceId: ws.id,
          email: opts.email,
          name: opts.name,
          smtpUrl: opts.smtp,
          imapUrl: opts.imap,
          poolId: opts.pool,
          dailyLimit: opts.dailyLimit,
          minIntervalMs: opts.minInterval,
        });
      });
      ctx.print(opts, { id: s.id, email: s.email, name: s.name, status: s.status }, `added sender ${s.email} (${s.id})`);
    },
  );
  jsonOption(
    sender
      .command('update')
      .description("change an account's daily limit, minimum interval or SMTP settings (new SMTP settings are tested against the server first)")
      .argument('<senderId>', 'sender account id')
      .option('--daily-limit <n|none>', 'most messages in any 24 hours; none: no limit', dailyLimitArg)
      .option('--min-interval <duration>', 'least time between two sends, e.g. 30s; 0s: none', durationArg)
      .option('--smtp <url>', 'smtp://user:pass@host:port or smtps://... (e.g. after a password change)'),
  ).action(async (id: string, opts: { dailyLimit?: number | 'none'; minInterval?: number; smtp?: string; json?: boolean }) => {
    if (opts.dailyLimit === undefined && opts.minInterval === undefined && opts.smtp === undefined) throw usageError('give --daily-limit, --min-interval or --smtp');
    const s = await ctx.withServices(async (services) =>
      services.dashboardSenders.updateAccount(await services.senders.workspaceOfSender(id), id, {
        dailyLimit: opts.dailyLimit === 'none' ? null : opts.dailyLimit,
        minIntervalSeconds: opts.minInterval === undefined ? undefined : opts.minInterval / 1000,
        smtpUrl: opts.smtp,
      }),
    );
    const limit = s.dailyLimit === null ? 'no daily limit' : `daily limit ${s.dailyLimit}`;
    const interval = s.minIntervalSeconds > 0 ? `at most one every ${s.minIntervalSeconds} s` : 'no minimum interval';
    ctx.print(opts, s, `sender ${s.email} (${s.id}): ${limit}, ${interval}, health ${s.health}`);
  });
  for (const [name, status] of [['pause', 'paused'], ['resume', 'active']] as const) {
    jsonOption(sender.command(name).description(`${name} a sender account`).argument('<id>', 'sender account id')).action(
      async (id: string, opts: { json?: boolean }) => {
        const s = await ctx.withServices((services) => services.senders.setStatus(id, status));
        ctx.print(opts, { id: s.id, status: s.status }, `sender ${s.id} is ${s.status}`);
      },
    );
  }

  const pool = program.command('pool').description('sender pools');
  jsonOption(
    pool
      .command('create')
      .description('create a sender pool')
      .requiredOption('--workspace <workspace>', 'workspace id or name')
      .requiredOption('--name <name>', 'pool name')
      .requiredOption('--daily-capacity <n>', 'most messages in any rolling 24 hours', intArg('--daily-capacity', 0, SENDER_LIMITS.dailyCapacity))
      .option('--sender <id>', 'a member sender account (repeatable)', (v: string, prev: string[] = []) => [...prev, v]),
  ).action(async (opts: { workspace: string; name: string; dailyCapacity: number; sender?: string[]; json?: boolean }) => {
    const p = await ctx.withServices(async (services) => {
      const ws = await services.workspaces.resolve(opts.workspace);
      return services.senders.createPool(ws.id, opts.name, opts.dailyCapacity, opts.sender ?? []);
    });
    ctx.print(opts, p, `created pool ${p.name} (${p.id}) with daily capacity ${p.dailyCapacity}`);
  });
  jsonOption(
    pool.command('add-sender').description('add a sender account to a pool').argument('<poolId>', 'pool id').argument('<senderId>', 'sender account id'),
  ).action(async (poolId: string, senderId: string, opts: { json?: boolean }) => {
    const r = await ctx.withServices((services) => services.senders.addToPool(poolId, senderId));
    ctx.print(opts, r, `pool ${r.id} now has ${r.senderAccountIds.length} sender(s)`);
  });
  jsonOption(
    pool
      .command('remove-sender')
      .description("take a sender account out of a pool; its leads' next steps go from the pool's other accounts")
      .argument('<poolId>', 'pool id')
      .argument('<senderId>', 'sender account id'),
  ).action(async (poolId: string, senderId: string, opts: { json?: boolean }) => {
    const r = await ctx.withServices((services) => services.senders.removeFromPool(poolId, senderId));
    ctx.print(opts, r, `pool ${r.id} now has ${r.senderAccountIds.length} sender(s)`);
  });
  jsonOption(
    pool
      .command('set-capacity')
      .description("change a pool's rolling 24-hour capacity")
      .argument('<poolId>', 'pool id')
      .argument('<n>', 'most messages through the pool in any rolling 24 hours', intArg('the capacity', 0, SENDER_LIMITS.dailyCapacity)),
  ).action(async (poolId: string, dailyCapacity: number, opts: { json?: boolean }) => {
    const p = await ctx.withServices(async (services) => services.dashboardSenders.setPoolCapacity(await services.senders.workspaceOfPool(poolId), poolId, dailyCapacity));
    ctx.print(opts, p, `pool ${p.name} (${p.id}): daily capacity ${p.dailyCapacity}, ${p.remainingVolume} left in the rolling 24 hours`);
  });
}
