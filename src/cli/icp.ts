import type { Command } from 'commander';
import { ApiError } from '../shared/errors.ts';
import { jsonOption, type CliContext } from './context.ts';

export function registerIcpCommands(program: Command, ctx: CliContext) {
  const icp = program.command('icp').description('ideal customer profile criteria checked at reply assignment');
  jsonOption(
    icp
      .command('set')
      .description('set the ICP criteria of a workspace (an empty list: everything passes)')
      .requiredOption('--workspace <workspace>', 'workspace id or name')
      .requiredOption('--seniority <list>', 'comma list of: unpaid, training, entry, senior, manager, director, vp, cxo, partner, owner')
      .requiredOption('--employee-count <list>', 'comma list of: 1-10, 11-50, 51-200, 201-500, 501-1000, 1001-5000, 5001-10000, 10001+'),
  ).action(async (opts: { workspace: string; seniority: string; employeeCount: string; json?: boolean }) => {
    const { parseIcpList } = await import('../modules/sdrs/icp.ts');
    let seniority: string[] | null;
    let employeeCounts: string[] | null;
    try {
      seniority = parseIcpList('seniority', opts.seniority);
      employeeCounts = parseIcpList('employeeCount', opts.employeeCount);
    } catch (err) {
      throw ApiError.invalid((err as Error).message);
    }
    const r = await ctx.withServices(async (services) => {
      const ws = await services.workspaces.resolve(opts.workspace);
      return services.sdrs.setIcp(ws.id, { seniority, employeeCounts });
    });
    ctx.print(opts, r, `ICP of ${r.workspaceId}: seniority ${r.seniority?.join(',') ?? 'any'}; employee count ${r.employeeCount?.join(',') ?? 'any'}`);
  });
}
