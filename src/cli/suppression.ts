import type { Command } from 'commander';
import { jsonOption, type CliContext } from './context.ts';

export function registerSuppressionCommands(program: Command, ctx: CliContext) {
  const suppression = program.command('suppression').description('the workspace suppression list');
  jsonOption(
    suppression
      .command('remove')
      .description('remove addresses from the suppression list')
      .requiredOption('--workspace <workspace>', 'workspace id or name')
      .argument('<emails...>', 'addresses to remove'),
  ).action(async (emails: string[], opts: { workspace: string; json?: boolean }) => {
    const removed = await ctx.withServices(async (services) => {
      const ws = await services.workspaces.resolve(opts.workspace);
      return services.suppression.remove(ws.id, emails);
    });
    ctx.print(opts, { removed }, `removed ${removed} address(es)`);
  });
}
