import type { Command } from 'commander';
import { readTextFile } from './input.ts';
import { ApiError } from '../shared/errors.ts';
import { jsonOption, type CliContext } from './context.ts';

export function registerKbCommands(program: Command, ctx: CliContext) {
  const kb = program.command('kb').description('the knowledge base AI drafts quote and link to (pricing, security, case studies…)');
  jsonOption(
    kb
      .command('add')
      .description('add an entry (its links and addresses become allowed in drafts)')
      .requiredOption('--workspace <workspace>', 'workspace id or name')
      .requiredOption('--title <title>', 'title, e.g. "Pricing"')
      .option('--file <file>', 'file holding the entry text')
      .option('--text <text>', 'the entry text'),
  ).action(async (opts: { workspace: string; title: string; file?: string; text?: string; json?: boolean }) => {
    if ((opts.file === undefined) === (opts.text === undefined)) throw ApiError.invalid('give exactly one of --file or --text');
    let text = opts.text;
    if (opts.file !== undefined) {
      text = await readTextFile('--file', opts.file);
    }
    const e = await ctx.withServices(async (services) => {
      const ws = await services.workspaces.resolve(opts.workspace);
      return services.kb.add(ws.id, opts.title, text!);
    });
    // Stored as written, but a draft quoting these links would be blocked at send: say so now.
    const { blockedLinks } = await import('../modules/drafts/kb.ts');
    const warnings = blockedLinks(e.body).map((l) => `link ${l.url} (${l.problems.join(', ')}) would block a draft that quotes it; use a direct https link`);
    for (const w of warnings) ctx.io.stderr.write(`warning: ${w}\n`);
    ctx.print(opts, { id: e.id, workspaceId: e.workspaceId, title: e.title, chars: e.body.length, createdAt: e.createdAt, warnings }, `added knowledge-base entry ${e.title} (${e.id})`);
  });
  jsonOption(kb.command('list').description('list the entries of a workspace').requiredOption('--workspace <workspace>', 'workspace id or name')).action(
    async (opts: { workspace: string; json?: boolean }) => {
      const entries = await ctx.withServices(async (services) => {
        const ws = await services.workspaces.resolve(opts.workspace);
        return services.kb.list(ws.id);
      });
      ctx.print(
        opts,
        { data: entries },
        entries.length === 0 ? 'no knowledge-base entries' : entries.map((e) => `${e.id}  ${e.title}  (${e.body.length} chars)`).join('\n'),
      );
    },
  );
  jsonOption(kb.command('remove').description('remove an entry').argument('<entryId>', 'entry id')).action(async (id: string, opts: { json?: boolean }) => {
    const r = await ctx.withServices((services) => services.kb.remove(id));
    ctx.print(opts, r, `removed knowledge-base entry ${r.id}`);
  });
}
