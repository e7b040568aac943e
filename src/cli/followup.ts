import type { Command } from 'commander';
import { parseDuration } from '../shared/duration.ts';
import { intArg, jsonOption, usageError, type CliContext } from './context.ts';
import { MAX_FOLLOWUP_ATTEMPTS } from '../modules/sdrs/limits.ts';

function afterArg(value: string): number {
  let ms: number;
  try {
    ms = parseDuration(value);
  } catch (err) {
    throw usageError(`--after: ${(err as Error).message}`);
  }
  if (ms <= 0) throw usageError('--after: must be greater than zero');
  return ms;
}

export function registerFollowupCommands(program: Command, ctx: CliContext) {
  const rule = program.command('followup-rule').description('follow-up rules: when a thread awaiting a reply gets a follow-up task');
  jsonOption(
    rule
      .command('add')
      .description('add a follow-up rule')
      .requiredOption('--workspace <workspace>', 'workspace id or name')
      .requiredOption('--name <name>', 'name')
      .requiredOption('--after <duration>', 'time after the last send, e.g. 3d or 48h')
      .option('--business-days', 'count the time in business days (Monday to Friday)')
      .option('--category <list>', 'comma list of thread categories A,B,C (default: all)')
      .option('--max-attempts <n>', 'follow-ups per thread (default 1)', intArg('--max-attempts', 1, MAX_FOLLOWUP_ATTEMPTS)),
  ).action(async (opts: { workspace: string; name: string; after: string; businessDays?: boolean; category?: string; maxAttempts?: number; json?: boolean }) => {
    const afterMs = afterArg(opts.after);
    const categories = opts.category === undefined ? null : opts.category.split(',').map((c) => c.trim()).filter((c) => c !== '');
    const r = await ctx.withServices(async (services) => {
      const ws = await services.workspaces.resolve(opts.workspace);
      return services.sdrs.addFollowupRule(ws.id, { name: opts.name, afterMs, businessDays: !!opts.businessDays, categories, maxAttempts: opts.maxAttempts });
    });
    ctx.print(opts, r, `added follow-up rule ${r.name} (${r.id})`);
  });
  jsonOption(rule.command('list').description('list the follow-up rules of a workspace').requiredOption('--workspace <workspace>', 'workspace id or name')).action(
    async (opts: { workspace: string; json?: boolean }) => {
      const rules = await ctx.withServices(async (services) => {
        const ws = await services.workspaces.resolve(opts.workspace);
        return services.sdrs.listFollowupRules(ws.id);
      });
      ctx.print(
        opts,
        { data: rules },
        rules.length === 0 ? 'no follow-up rules' : rules.map((r) => `${r.id}  ${r.name}  after ${r.afterMs}ms${r.businessDays ? ' (business days)' : ''}  ${r.categories?.join(',') ?? 'A,B,C'}  x${r.maxAttempts}`).join('\n'),
      );
    },
  );
  jsonOption(rule.command('remove').description('remove a follow-up rule').argument('<ruleId>', 'rule id')).action(async (ruleId: string, opts: { json?: boolean }) => {
    const r = await ctx.withServices((services) => services.sdrs.removeFollowupRule(ruleId));
    ctx.print(opts, r, `removed follow-up rule ${r.id}`);
  });
}
