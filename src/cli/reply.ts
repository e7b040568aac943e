import { Option, type Command } from 'commander';
import { jsonOption, type CliContext } from './context.ts';
import { OPERATOR_CLASSIFICATIONS } from '../modules/inbound/classification.ts';

export function registerReplyCommands(program: Command, ctx: CliContext) {
  const reply = program.command('reply').description('campaign replies');
  jsonOption(
    reply
      .command('update')
      .description(
        "correct a reply's classification (PATCH /v1/replies/:replyId): the campaign's replied count, the lead's sequence and the suppression list follow as if the classifier had decided so",
      )
      .argument('<replyId>', 'reply id (rpl_...)')
      .addOption(new Option('--classification <classification>', 'the classification it should have').choices(OPERATOR_CLASSIFICATIONS).makeOptionMandatory()),
  ).action(async (id: string, opts: { classification: string; json?: boolean }) => {
    const out = await ctx.withServices(async (services) => {
      const { replyView } = await import('../modules/inbound/view.ts');
      const workspaceId = await services.replies.workspaceOf(id);
      const { reply: r, effects } = await services.replies.reclassify(workspaceId, id, opts.classification, 'cli');
      const holders = r.forwarded_at ? await services.sdrs.holdersOfReplies(workspaceId, [r.id]) : [];
      return { ...replyView(r, holders), effects };
    });
    const fx = out.effects;
    const human = fx.changed
      ? [
          [
            `reply ${out.id} (${out.email}): ${fx.from} -> ${out.classification}`,
            `replied ${fx.replied > 0 ? '+1' : fx.replied < 0 ? '-1' : 'unchanged'}`,
            ...(fx.sequenceStopped ? [`the lead's sequence was stopped (${fx.leadStatus})`] : []),
            ...(fx.suppressed ? [`${out.email} was put on the suppression list`] : []),
          ].join('; ') + '.',
          ...fx.notes,
        ].join(' ')
      : `reply ${out.id} (${out.email}) is ${out.classification} already: nothing changed`;
    ctx.print(opts, out, human);
  });
}
