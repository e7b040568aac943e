// AI reply drafts (spec §4, contract §9): the planner -> writer -> judge pipeline, the draft
// lifecycle (generated -> edited -> sent | discarded | superseded) and the guarded send through
// the SDR's own mailbox. LLM calls run outside any transaction; what a request writes, it
// writes in one transaction at the end, so a failed request writes nothing.
import type { EntityManager } from '@mikro-orm/postgresql';
import { OPEN_STATES, discard, draftOf, edit, insertDraft, insightOf, lockDraft, discardAndMoveDrafts, lockOpenDrafts, lockOpenDraftsOf, lockThreadForDraft, markDraftSent, supersede, supersedeByManualReply, supersedeSiblings, type Approach, type DraftRow, type DraftState, type InsightRow } from './repository.ts';
import { newId } from '../../adapters/ids.ts';
import { LlmError, type LlmProvider } from '../../adapters/llm.ts';
import { ApiError } from '../../shared/errors.ts';
import { toDate, toIso } from '../../shared/time.ts';
import { normalizeEmail } from '../../shared/email.ts';
import type { Deps } from '../../deps.ts';
import type { Clock } from '../../adapters/clock.ts';
import type { ThreadScope } from '../sdrs/threads.ts';
import { replySubject } from '../sending/render.ts';
import type { DeskMailService, ThreadMail } from '../sdrs/desk-mail.ts';
import type { KbService } from './kb.ts';
import { DraftPlanner, type AppliedRule, type DraftContext } from './planner.ts';
import { composeOffline, type Style } from './offline.ts';
import { APPROACHES, rubricWithLlm, writeWithLlm, type Rubric } from './writer.ts';
import { judgeDraft, type Scores } from './judge.ts';
import { runGuardrails, type GuardrailsResult } from './guardrails.ts';
import { textToHtml } from './html.ts';
import { withoutBrokenPair } from './sanitize.ts';
import { transaction } from '../../db/transaction.ts';

export type { DraftState, Approach };

/**
 * The SDR answered the thread by hand (send-manual; the desk's reaction, wired in services.ts,
 * run in the send's transaction before the send is recorded): the thread's open drafts answer
 * a message that has been answered now, so they become superseded, as a sent draft's siblings
 * do (`supersededBy` null: no draft took their place). They are locked first, in id order, as
 * a draft's send locks them before it locks the thread: a send of one of them waits and then
 * finds it superseded (409 draft_not_sendable). Returns how many were superseded.
 */
export async function draftsOnManualReply(em: EntityManager, clock: Clock, threadId: string): Promise<number> {
  await lockOpenDrafts(em, threadId);
  return supersedeByManualReply(em, threadId, clock.now());
}

/**
 * Threads moved to another SDR (the desk's reassignment, wired in services.ts): their open
 * drafts are locked first, in id order (a send's lock order: drafts, then the thread), then
 * discarded (written in the old SDR's voice and signed with their name, they must not go out
 * from the new SDR's mailbox), and every draft of the threads becomes the new SDR's.
 */
export const draftsOnReassign = {
  lock: (em: EntityManager, threadIds: string[]) => lockOpenDraftsOf(em, threadIds),
  moved: (em: EntityManager, clock: Clock, threadIds: string[], toSdrId: string) => discardAndMoveDrafts(em, threadIds, toSdrId, clock.now()),
};

export function draftView(d: DraftRow) {
  return {
    id: d.id,
    threadId: d.thread_id,
    state: d.state,
    subject: d.subject,
    bodyText: d.body_text,
    bodyHtml: d.body_html,
    instructions: d.instructions,
    model: d.model,
    usage: d.prompt_tokens === null && d.completion_tokens === null ? null : { promptTokens: d.prompt_tokens ?? 0, completionTokens: d.completion_tokens ?? 0 },
    latencyMs: d.latency_ms,
    sentMessageId: d.sent_message_id,
    supersededBy: d.superseded_by,
    createdAt: toIso(d.created_at),
    updatedAt: toIso(d.updated_at),
  };
}

export function insightView(i: InsightRow) {
  return { draftId: i.draft_id, approach: i.approach, confidence: Number(i.confidence), rationale: i.rationale, scores: i.scores.scores ?? null };
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** One written variant before it is stored. */
interface Variant {
  style: Style;
  approach: Approach;
  bodyText: string;
  confidence: number;
  rationale: string;
  model: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
  latencyMs: number;
  judged: ReturnType<typeof judgeDraft>;
  rubric: Rubric | null;
}

export interface GenerateInput {
  threadId: string;
  instructions?: string;
  variantCount: number;
}

export interface SendInput {
  finalBodyText?: string;
  finalBodyHtml?: string;
  additionalCc?: string[];
}

export class DraftService {
  constructor(
    private readonly deps: Deps,
    private readonly em: EntityManager,
    /** The SDR desk that sends a draft through the SDR's mailbox (wired in services.ts). */
    private readonly desk: DeskMailService,
    /** The knowledge base the planner draws on (wired in services.ts). */
    private readonly kb: KbService,
  ) {}

  private get llm(): LlmProvider | null {
    return this.deps.llm;
  }

  /** POST /v1/sdr/drafts/generate: `variantCount` drafts, each with a different approach. */
  async generate(scope: ThreadScope, input: GenerateInput) {
    const ctx = await new DraftPlanner(this.em, this.kb).plan(scope, input.threadId);
    const styles = APPROACHES.slice(0, input.variantCount);
    const variants = await Promise.all(styles.map((style) => this.write(ctx, style, input.instructions ?? null)));
    const stored = await transaction(this.em, async (tx) => {
      await this.threadStillMine(tx, scope, ctx.threadId);
      const out = [];
      for (const v of variants) out.push(await this.insert(tx, scope, ctx, v, input.instructions ?? null));
      return out;
    });
    return { data: { drafts: stored.map((s) => s.draft), insights: stored.map((s) => s.insight), appliedRules: ctx.appliedRules } };
  }

  /** POST /v1/sdr/drafts/:id/regenerate: a new draft with the same approach; the old one becomes superseded. */
  async regenerate(scope: ThreadScope, draftId: string, instructions: string | undefined) {
    const old = await this.row(scope, draftId);
    if (!OPEN_STATES.includes(old.state)) throw notEditable(old);
    const insight = await insightOf(this.em, draftId);
    const style: Style = insight?.scores.style ?? 'direct_answer';
    const ctx = await new DraftPlanner(this.em, this.kb).plan(scope, old.thread_id);
    const chosen = instructions ?? old.instructions;
    const variant = await this.write(ctx, style, chosen);
    return transaction(this.em, async (tx) => {
      await this.threadStillMine(tx, scope, old.thread_id);
      const now = this.deps.clock.now();
      const stored = await this.insert(tx, scope, ctx, variant, chosen);
      // Compare-and-set: a concurrent send, discard or regenerate of the old draft wins.
      if (!(await supersede(tx, draftId, stored.draft.id, now))) throw notEditable(await this.row(scope, draftId, tx));
      return { data: stored };
    });
  }

  /** Drafts are stored only in a thread the SDR still holds (an admin may have moved it while the model wrote): else 404 thread_not_found. */
  private async threadStillMine(tx: EntityManager, scope: ThreadScope, threadId: string): Promise<void> {
    if (!(await lockThreadForDraft(tx, scope.workspaceId, scope.sdrId, threadId))) throw ApiError.notFound('thread', `thread ${threadId} not found`);
  }

  /** GET /v1/sdr/drafts/:id. */
  async get(scope: ThreadScope, draftId: string) {
    const d = await this.row(scope, draftId);
    const insight = await insightOf(this.em, draftId);
    return { data: { draft: draftView(d), insight: insight ? insightView(insight) : null } };
  }

  /** PATCH /v1/sdr/drafts/:id: bodyText (bodyHtml is then rendered from it unless given), bodyHtml, subject. */
  async patch(scope: ThreadScope, draftId: string, input: { bodyText?: string; bodyHtml?: string; subject?: string }) {
    const d = await this.row(scope, draftId);
    const bodyText = input.bodyText ?? d.body_text;
    const bodyHtml = input.bodyHtml ?? (input.bodyText !== undefined ? textToHtml(input.bodyText) : d.body_html);
    const subject = input.subject !== undefined ? input.subject.replace(/[\r\n]+/g, ' ').trim() : d.subject;
    const row = await edit(this.em, draftId, { bodyText, bodyHtml, subject }, this.deps.clock.now());
    if (!row) throw notEditable(await this.row(scope, draftId));
    return { data: { draft: draftView(row) } };
  }

  /** DELETE /v1/sdr/drafts/:id: discards; discarding a discarded draft is a no-op. */
  async discard(scope: ThreadScope, draftId: string): Promise<void> {
    const d = await this.row(scope, draftId);
    if (d.state === 'discarded') return;
    if (!(await discard(this.em, draftId, this.deps.clock.now()))) {
      const now = await this.row(scope, draftId);
      if (now.state !== 'discarded') throw notEditable(now);
    }
  }

  /**
   * POST /v1/sdr/drafts/:id/send. The guardrails run on the final body first (a block is 422
   * guardrails_blocked and writes nothing); then, holding the draft's row lock so a concurrent
   * send waits and then finds it sent, the mail goes out through the SDR's mailbox and the send
   * is recorded with the draft's new state in the same transaction.
   */
  async send(scope: ThreadScope, draftId: string, input: SendInput) {
    const d = await this.row(scope, draftId);
    if (!OPEN_STATES.includes(d.state)) throw notSendable(d);
    const prepared = await this.desk.prepare(scope.sdrId, scope.workspaceId, d.thread_id);
    const mail: ThreadMail = {
      subject: d.subject,
      bodyText: input.finalBodyText ?? d.body_text,
      bodyHtml: input.finalBodyHtml ?? (input.finalBodyText !== undefined ? textToHtml(input.finalBodyText) : d.body_html),
      cc: dedupe(input.additionalCc ?? []),
    };
    const guardrails = await this.guardrails(scope, d.thread_id, mail, [prepared.thread.contact_email]);
    if (guardrails.blocked) throw new ApiError(422, 'guardrails_blocked', `the send is blocked: ${summary(guardrails)}`, { guardrails });

    // In a desk send slot (sdrs/desk-slots.ts), as every desk send: the transaction is held
    // across the SMTP transaction, and at most half the pool's connections may wait on SMTP servers.
    return this.desk.inSendSlot(() => this.em.transactional(async (tx) => {
      // The thread's open drafts first: the variants of one generation are answers to the same
      // message, so once one is sent the others are superseded by it (below); a concurrent send
      // of a sibling waits here and then finds its draft no longer open.
      await lockOpenDrafts(tx, d.thread_id);
      const locked = await lockDraft(tx, draftId);
      if (!OPEN_STATES.includes(locked.state)) throw notSendable(locked);
      // Edited since this send read it (a PATCH while the guardrails ran): the mail would carry
      // the old text and the record would overwrite the edit. Nothing is sent; the SDR sends
      // what the draft says now.
      if (toDate(locked.updated_at).getTime() !== toDate(d.updated_at).getTime())
        throw new ApiError(409, 'draft_changed', `draft ${draftId} was changed while it was being sent; nothing was sent: send it again`, { state: locked.state });
      // Then the thread, held through the SMTP transaction: an admin's reassignment of it waits
      // for this send, and a thread moved before it is refused (404), never sent from here.
      const ready = await this.desk.lockForSend(tx, scope.sdrId, prepared);
      const sent = await this.desk.transmit(ready, mail, { stableKey: draftId }, tx);
      await this.desk.record(tx, ready, mail, sent);
      await markDraftSent(tx, draftId, prepared.thread.campaign_id && prepared.thread.lead_id ? sent.id : null, mail, this.deps.clock.now());
      await supersedeSiblings(tx, d.thread_id, draftId, this.deps.clock.now());
      return { data: { messageId: sent.id, guardrails } };
    }));
  }

  /** The guardrails on a final body (the deterministic checks, plus the LLM rubric when one is configured). */
  async guardrails(scope: ThreadScope, threadId: string, mail: ThreadMail, to: string[]): Promise<GuardrailsResult> {
    const ctx = await new DraftPlanner(this.em, this.kb).plan(scope, threadId);
    let unsupportedClaims: string[] | undefined;
    let unansweredAsks: string[] | undefined;
    let rubricError: string | null = null;
    if (this.llm) {
      try {
        const { rubric } = await rubricWithLlm(this.llm, ctx, mail.bodyText);
        unsupportedClaims = rubric.unsupportedClaims;
        unansweredAsks = rubric.asks.filter((a) => !a.answered).map((a) => a.ask);
      } catch (err) {
        if (!(err instanceof LlmError)) throw err;
        rubricError = err.message;
        this.deps.log.warn({ err: err.message, kind: err.kind, threadId }, 'send-readiness rubric unavailable; deterministic guardrails only');
      }
    }
    const result = runGuardrails({
      subject: mail.subject,
      bodyText: mail.bodyText,
      bodyHtml: mail.bodyHtml,
      to,
      cc: mail.cc,
      thread: { contactEmail: ctx.thread.contactEmail, participants: ctx.participants, sdrEmail: ctx.sdr.email },
      allowed: ctx.sendAllowed,
      threshold: this.deps.config.guardrailThreshold,
      contactName: ctx.contact.firstName,
      company: ctx.contact.company,
      lastProspectMessage: ctx.lastProspectMessage,
      language: ctx.language,
      unsupportedClaims,
      unansweredAsks,
    });
    if (rubricError)
      result.issues.push({ code: 'rubric_unavailable', severity: 'warn', message: `the LLM send-readiness check could not run (${rubricError}); only the rule checks were applied`, field: 'bodyText' });
    return result;
  }

  /** Writes one variant: the LLM when configured (falling back to the offline composer if it fails), then the judge. */
  private async write(ctx: DraftContext, style: Style, instructions: string | null): Promise<Variant> {
    const llm = this.llm;
    let v: Omit<Variant, 'judged' | 'rubric'> | null = null;
    let fallbackReason: string | null = null;
    if (llm) {
      try {
        const w = await writeWithLlm(llm, ctx, style, instructions);
        v = { style, approach: style, bodyText: w.bodyText, confidence: w.confidence, rationale: w.rationale, model: w.model, promptTokens: w.usage.promptTokens, completionTokens: w.usage.completionTokens, latencyMs: w.latencyMs };
      } catch (err) {
        if (!(err instanceof LlmError)) throw err;
        fallbackReason = `${err.kind}: ${err.message}`;
        this.deps.log.warn({ err: err.message, kind: err.kind, threadId: ctx.threadId }, 'LLM writer failed; drafting with the offline composer');
      }
    }
    if (!v) {
      const started = performance.now();
      const o = composeOffline(ctx, style, instructions);
      v = {
        style,
        approach: 'offline_template',
        bodyText: o.bodyText,
        confidence: 0,
        rationale: fallbackReason ? `${o.rationale} The LLM failed (${withoutBrokenPair(fallbackReason.slice(0, 200))}).` : o.rationale,
        model: null,
        promptTokens: null,
        completionTokens: null,
        latencyMs: Math.round(performance.now() - started),
      };
    }
    const judged = judgeDraft({
      bodyText: v.bodyText,
      contactName: ctx.contact.firstName,
      company: ctx.contact.company,
      lastProspectMessage: ctx.lastProspectMessage,
      allowedDomains: ctx.sendAllowed.domains,
      language: ctx.language,
    });
    let rubric: Rubric | null = null;
    if (llm && v.approach !== 'offline_template') {
      try {
        const r = await rubricWithLlm(llm, ctx, v.bodyText);
        rubric = r.rubric;
        v.promptTokens = (v.promptTokens ?? 0) + r.usage.promptTokens;
        v.completionTokens = (v.completionTokens ?? 0) + r.usage.completionTokens;
        v.latencyMs += r.latencyMs;
      } catch (err) {
        if (!(err instanceof LlmError)) throw err;
        this.deps.log.warn({ err: err.message, kind: err.kind, threadId: ctx.threadId }, 'LLM rubric failed; insight without it');
      }
    }
    // Confidence: the judge's overall score, blended with the writer's own estimate when an LLM
    // wrote it, halved when the rubric found an unsupported claim; a template is capped at 0.8.
    let confidence = v.approach === 'offline_template' ? 0.8 * judged.scores.overall : 0.5 * judged.scores.overall + 0.5 * v.confidence;
    if (rubric && rubric.unsupportedClaims.length > 0) confidence /= 2;
    return { ...v, confidence: round3(confidence), judged, rubric };
  }

  private async insert(tx: EntityManager, scope: ThreadScope, ctx: DraftContext, v: Variant, instructions: string | null) {
    const now = this.deps.clock.now();
    const id = newId('drf');
    const scores = { scores: v.judged.scores, details: v.judged.details, rubric: v.rubric, style: v.style, appliedRules: ctx.appliedRules satisfies AppliedRule[] };
    const { row, insight } = await insertDraft(
      tx,
      {
        id,
        workspaceId: scope.workspaceId,
        threadId: ctx.threadId,
        sdrId: scope.sdrId,
        subject: replySubject(ctx.thread.subject),
        bodyText: v.bodyText,
        bodyHtml: textToHtml(v.bodyText),
        instructions,
        model: v.model,
        promptTokens: v.promptTokens,
        completionTokens: v.completionTokens,
        latencyMs: v.latencyMs,
      },
      { approach: v.approach, confidence: v.confidence, rationale: v.rationale, scores },
      now,
    );
    return { draft: draftView(row), insight: insightView(insight) };
  }

  private async row(scope: ThreadScope, draftId: string, em: EntityManager = this.em): Promise<DraftRow> {
    const d = await draftOf(em, scope.workspaceId, scope.sdrId, draftId);
    if (!d) throw ApiError.notFound('draft', `draft ${draftId} not found`);
    return d;
  }
}

function notSendable(d: DraftRow): ApiError {
  return new ApiError(409, 'draft_not_sendable', `draft ${d.id} is ${d.state}; only a generated or edited draft can be sent`, { state: d.state });
}

function notEditable(d: DraftRow): ApiError {
  return new ApiError(409, 'draft_not_editable', `draft ${d.id} is ${d.state}; only a generated or edited draft can be changed`, { state: d.state });
}

function dedupe(emails: string[]): string[] {
  const seen = new Set<string>();
  return emails.filter((e) => {
    const k = normalizeEmail(e);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

function summary(g: GuardrailsResult): string {
  const blocks = g.issues.filter((i) => i.severity === 'block');
  return blocks.length ? blocks.map((i) => i.code).join(', ') : 'low score';
}
