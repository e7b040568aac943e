import { Option, type Command } from 'commander';
import { jsonOption, usageError, type CliContext } from './context.ts';

export function registerWorkspaceCommands(program: Command, ctx: CliContext) {
  const workspace = program.command('workspace').description('workspaces');
  jsonOption(workspace.command('create').description('create a workspace').requiredOption('--name <name>', 'workspace name')).action(
    async (opts: { name: string; json?: boolean }) => {
      const ws = await ctx.withServices((s) => s.workspaces.create(opts.name), { createDatabase: true });
      ctx.print(opts, { id: ws.id, name: ws.name }, `created workspace ${ws.name} (${ws.id})`);
    },
  );
  jsonOption(workspace.command('delete').description('delete a workspace and all its data').argument('<id>', 'workspace id or name')).action(
    async (id: string, opts: { json?: boolean }) => {
      const ws = await ctx.withServices((s) => s.workspaces.delete(id));
      ctx.print(opts, { id: ws.id, deleted: true }, `deleted workspace ${ws.id}`);
    },
  );

  const key = program.command('key').description('API keys');
  jsonOption(
    key
      .command('create')
      .description('create an API key (shown only once)')
      .requiredOption('--workspace <workspace>', 'workspace id or name')
      // A malformed value is a usage error (exit 2), refused before the database is opened.
      .addOption(new Option('--role <role>', 'admin or sdr').choices(['admin', 'sdr']).default('admin'))
      .option('--sdr <sdrId>', 'the SDR an sdr key acts for (required with --role sdr)')
      .option('--name <name>', 'a label for the key'),
  ).action(async (opts: { workspace: string; role: 'admin' | 'sdr'; sdr?: string; name?: string; json?: boolean }) => {
    if (opts.role === 'sdr' && !opts.sdr) throw usageError('--sdr: required with --role sdr');
    if (opts.role === 'admin' && opts.sdr) throw usageError('--sdr: only with --role sdr');
    const k = await ctx.withServices((s) => s.workspaces.createKey({ workspace: opts.workspace, role: opts.role, sdrId: opts.sdr, name: opts.name }));
    ctx.print(
      opts,
      { id: k.id, key: k.key, role: k.role, workspaceId: k.workspaceId, sdrId: k.sdrId },
      `created ${k.role} key ${k.id} for workspace ${k.workspaceId}\nAPI key (shown only this once): ${k.key}`,
    );
  });
  jsonOption(key.command('revoke').description('revoke an API key').argument('<keyId>', 'key id (key_...)')).action(
    async (id: string, opts: { json?: boolean }) => {
      await ctx.withServices((s) => s.workspaces.revokeKey(id));
      ctx.print(opts, { id, revoked: true }, `revoked key ${id}`);
    },
  );
}
