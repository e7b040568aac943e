import type { Command } from 'commander';
import { EXIT_ERROR, jsonOption, type CliContext } from './context.ts';
import { readTextFile } from './input.ts';

export function registerSdrCommands(program: Command, ctx: CliContext) {
  const sdr = program.command('sdr').description('SDRs (sales reps) and their mailboxes');
  jsonOption(
    sdr
      .command('add')
      .description('add an SDR')
      .requiredOption('--workspace <workspace>', 'workspace id or name')
      .requiredOption('--name <name>', 'name')
      .requiredOption('--email <email>', 'email address (where assigned replies are forwarded)'),
  ).action(async (opts: { workspace: string; name: string; email: string; json?: boolean }) => {
    const s = await ctx.withServices(async (services) => {
      const ws = await services.workspaces.resolve(opts.workspace);
      return services.sdrs.add(ws.id, opts.name, opts.email);
    });
    ctx.print(opts, { id: s.id, name: s.name, email: s.email }, `added SDR ${s.name} (${s.id})`);
  });
  jsonOption(
    sdr
      .command('connect-mail')
      .description("connect the SDR's mailbox (credentials are checked against the servers)")
      .argument('<sdrId>', 'SDR id')
      .requiredOption('--smtp <url>', 'smtp://user:pass@host:port or smtps://...')
      .requiredOption('--imap <url>', 'imap://user:pass@host:port or imaps://...')
      .option('--email <email>', 'mailbox address (default: the SDR email)'),
  ).action(async (sdrId: string, opts: { smtp: string; imap: string; email?: string; json?: boolean }) => {
    const { sdr: s, mailbox } = await ctx.withServices((services) => services.sdrs.connectMail(sdrId, { smtpUrl: opts.smtp, imapUrl: opts.imap, email: opts.email }));
    const { sdrView } = await import('../modules/sdrs/service.ts');
    const view = sdrView(s, mailbox);
    ctx.print(
      opts,
      { id: view.id, mailConnected: view.mailConnected, mailEmail: view.mailEmail, healthState: mailbox.healthState, lastSyncError: mailbox.lastSyncError },
      view.mailConnected ? `connected ${mailbox.email} for SDR ${s.id}` : `mailbox stored but not usable (${mailbox.healthState}): ${mailbox.lastSyncError}`,
    );
    // Stored either way (the watcher retries it), but a script checking the exit code must
    // learn that the servers refused, as with `sender test`.
    if (!view.mailConnected) ctx.setExitCode(EXIT_ERROR);
  });
  for (const [name, active] of [['activate', true], ['deactivate', false]] as const) {
    jsonOption(sdr.command(name).description(`${name} an SDR`).argument('<sdrId>', 'SDR id')).action(async (sdrId: string, opts: { json?: boolean }) => {
      const s = await ctx.withServices((services) => services.sdrs.setActive(sdrId, active));
      ctx.print(opts, { id: s.id, active: s.active }, `SDR ${s.id} is ${s.active ? 'active' : 'inactive'}`);
    });
  }
  jsonOption(
    sdr
      .command('reassign-threads')
      .description("move an SDR's prospect threads to another active SDR with a connected mailbox (every open thread, or those given with --thread)")
      .argument('<sdrId>', 'the SDR whose threads move')
      .requiredOption('--to <sdrId>', 'the SDR who takes them over (same workspace)')
      .option('--thread <threadId>', 'a thread to move (repeatable; any status); omitted: every open thread', (v: string, all: string[]) => [...all, v], [] as string[]),
  ).action(async (sdrId: string, opts: { to: string; thread: string[]; json?: boolean }) => {
    const r = await ctx.withServices(async (services) => {
      const from = await services.sdrs.get(sdrId);
      return services.reassignments.reassign(from.workspaceId, from.id, { toSdrId: opts.to, threadIds: opts.thread.length ? opts.thread : undefined });
    });
    const d = r.data;
    ctx.print(
      opts,
      d,
      `moved ${d.threadIds.length} thread${d.threadIds.length === 1 ? '' : 's'} from ${d.fromSdrId} to ${d.toSdrId}` +
        ` (${d.followupIds.length} pending follow-up${d.followupIds.length === 1 ? '' : 's'} moved, ${d.discardedDraftIds.length} open draft${d.discardedDraftIds.length === 1 ? '' : 's'} discarded)`,
    );
  });
  jsonOption(
    sdr
      .command('set-profile')
      .description("set the SDR's profile used for drafts (an empty value clears a field)")
      .argument('<sdrId>', 'SDR id')
      .option('--tone <tone>', 'writing tone, e.g. "warm, concise"')
      .option('--signature-file <file>', 'file holding the email signature (plain text)')
      .option('--calendar-url <url>', 'https booking link')
      .option('--language <language>', 'language tag, e.g. en or pt-BR'),
  ).action(async (sdrId: string, opts: { tone?: string; signatureFile?: string; calendarUrl?: string; language?: string; json?: boolean }) => {
    let signature: string | undefined;
    if (opts.signatureFile !== undefined) {
      signature = await readTextFile('--signature-file', opts.signatureFile);
    }
    const s = await ctx.withServices((services) => services.sdrs.setProfile(sdrId, { tone: opts.tone, signature, calendarUrl: opts.calendarUrl, language: opts.language }));
    const { profileView } = await import('../modules/sdrs/service.ts');
    ctx.print(opts, profileView(s), `profile of SDR ${s.id} updated`);
  });
}
