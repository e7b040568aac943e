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
}
