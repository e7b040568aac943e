// One prospect thread: messages in order (the newest open, older folded; prospect mail as text,
// never as live HTML), the handoff snapshot, status changes limited to the state machine's
// allowed transitions, snooze, AI drafts and a manual reply.
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, call, del, get, patch, post } from '../api.ts';
import { allowedTransitions } from '../../../src/modules/sdrs/threads-state.ts';
import { Link } from '../router.tsx';
import { Action, ActionRow, Ago, copyText, ErrorNote, Field, forgetUnsentText, keptUnsentText, Pill, useLoad, useUnsentText } from '../ui.tsx';
import { INBOX_POLL_MS } from './inbox.tsx';
import type { Draft, DraftInsight, Guardrails, ThreadDetail, ThreadMessage } from '../types.ts';

interface Snapshot {
  campaign?: { id: string; name: string | null };
  lead?: { email: string; firstName: string | null; lastName: string | null; company: string | null; jobTitle: string | null };
  messages?: { direction: string; subject: string; bodyText: string; at: string | null; stepIndex?: number; classification?: string }[];
}

/** A draft that can still be edited, sent, regenerated or discarded. */
const isOpen = (d: Draft) => d.state === 'generated' || d.state === 'edited';

/** Text put back into an editor (a draft's, the reply's): a new object each time, so the same text can come twice. */
type Restore = { text: string };

export function ThreadView({ id, onChanged }: { id: string; onChanged: () => void }) {
  const thread = useLoad(() => get<{ data: ThreadDetail }>(`/v1/sdr/threads/${id}`), [id], INBOX_POLL_MS);
  const [toReply, setToReply] = useState<Restore | null>(null);
  const t = thread.data?.data;
  const changed = async () => {
    await thread.reload();
    onChanged();
  };
  if (thread.error && !t) return <ErrorNote error={thread.error} />;
  if (!t || t.id !== id) return <p class="loading">Loading thread…</p>;
  const snap = t.handoff?.snapshot as Snapshot | undefined;
  return (
    <article class="card" aria-labelledby="thread-h" data-thread-view={t.id}>
      <h2 id="thread-h" tabIndex={-1}>
        {t.subject}
      </h2>
      <p>
        {t.contactName} &lt;{t.contactEmail}&gt; · <Pill state={t.status} /> · category {t.category} · priority {t.priorityScore.toFixed(0)}
        {t.snoozedUntil && (
          <>
            {' '}
            · snoozed until <Ago at={t.snoozedUntil} />
          </>
        )}
      </p>
      <StatusBar thread={t} onChanged={changed} />
      {snap && (
        <details class="card">
          <summary>
            Handoff: {snap.campaign?.name ?? snap.campaign?.id} · {[snap.lead?.firstName, snap.lead?.lastName].filter(Boolean).join(' ')} {snap.lead?.jobTitle && `(${snap.lead.jobTitle})`} {snap.lead?.company && `at ${snap.lead.company}`}
          </summary>
          {t.handoff?.note && <p>Note from the admin: {t.handoff.note}</p>}
          <p class="muted">
            seniority {t.handoff?.seniority ?? '—'} · employees {t.handoff?.employeeCount ?? '—'} · forwarded <Ago at={t.handoff?.createdAt} />
          </p>
          {snap.messages?.map((m, i) => (
            <div class={`message ${m.direction}`} key={i}>
              <strong>{m.direction === 'outbound' ? `Campaign step ${(m.stepIndex ?? 0) + 1}` : `Reply (${m.classification ?? 'unclassified'})`}</strong> · {m.subject} {m.at && <Ago at={m.at} />}
              <pre>{m.bodyText}</pre>
            </div>
          ))}
        </details>
      )}
      <h3>Messages</h3>
      {t.messages.map((m, i) => (
        <Message key={m.id} m={m} open={i === t.messages.length - 1} />
      ))}
      <Drafts key={`drafts-${t.id}`} thread={t} onChanged={changed} onToReply={(text) => setToReply({ text })} />
      <ManualReply
        key={`reply-${t.id}`}
        threadId={t.id}
        openDrafts={t.drafts.filter(isOpen).length}
        restored={toReply}
        onRestored={() => setToReply(null)}
        onSent={changed}
      />
    </article>
  );
}

function Message({ m, open }: { m: ThreadMessage; open: boolean }) {
  const head = (
    <>
      <strong>{m.direction === 'inbound' ? m.fromEmail : `You (${m.fromEmail})`}</strong> <Ago at={m.at} />
    </>
  );
  return (
    <div class={`message ${m.direction}`} data-message={m.direction}>
      {open ? (
        <>
          {head}
          <div class="muted">{m.subject}</div>
          <pre>{m.bodyText}</pre>
        </>
      ) : (
        <details>
          <summary>
            {head} <span class="muted">{m.bodyText.slice(0, 80)}</span>
          </summary>
          <pre>{m.bodyText}</pre>
        </details>
      )}
    </div>
  );
}

/**
 * A send refused because the SDR's own mailbox cannot send (409 mail_not_connected): what is
 * wrong with it, and the way to fix it, instead of the server's "not usable (needs_reauth)".
 */
export function SendError({ error }: { error: unknown }) {
  if (error instanceof ApiError && error.code === 'mail_not_connected') {
    const state = /\(([a-z_ ]+)\)\s*$/.exec(error.message)?.[1] ?? '';
    // A rate_limited mailbox is tried (a 421 then is a 502 send_failed, shown as the server said it).
    const what = state === 'needs_reauth' ? 'your mailbox refused mailgate\'s login (a changed password?)' : 'your mailbox is not connected';
    return (
      <p class="error" role="alert" data-testid="send-error">
        Not sent: {what}. Replies go out through your own mailbox: <Link href="/mail">{state === 'needs_reauth' ? 'reconnect it on Mail connection' : 'connect it on Mail connection'}</Link>, then send again. Your text is kept.
      </p>
    );
  }
  return <ErrorNote error={error} />;
}

function StatusBar({ thread, onChanged }: { thread: ThreadDetail; onChanged: () => Promise<void> }) {
  const [error, setError] = useState<unknown>(undefined);
  const bar = useRef<HTMLDivElement>(null);
  // The button pressed goes away (another status offers other moves; Snooze becomes Unsnooze):
  // focus moves to the first button of the same group, else the thread's heading, not to <body>.
  const refocus = useRef<string | null>(null);
  useEffect(() => {
    const group = refocus.current;
    refocus.current = null;
    if (!group || (document.activeElement && document.activeElement !== document.body)) return;
    const next = bar.current?.querySelector<HTMLElement>(`[data-group="${group}"] button`) ?? document.getElementById('thread-h');
    next?.focus();
  }, [thread.status, thread.snoozedUntil]);
  const move = async (to: string) => {
    setError(undefined);
    try {
      refocus.current = 'move';
      await patch(`/v1/sdr/threads/${thread.id}`, { status: to });
      await onChanged();
    } catch (e) {
      refocus.current = null;
      if (e instanceof ApiError && e.code === 'invalid_transition') setError(new Error(`${e.message} Allowed now: ${(e.body?.allowedTransitions ?? []).join(', ') || 'none'}.`));
      else setError(e);
    }
  };
  const snooze = async (until: string | null) => {
    setError(undefined);
    try {
      refocus.current = 'snooze';
      if (until) await post(`/v1/sdr/threads/${thread.id}/snooze`, { until });
      else await post(`/v1/sdr/threads/${thread.id}/unsnooze`);
      await onChanged();
    } catch (e) {
      refocus.current = null;
      setError(e);
    }
  };
  const inHours = (hours: number) => new Date(Date.now() + hours * 3_600_000).toISOString();
  return (
    <div class="stack" ref={bar}>
      <div class="row" role="group" aria-label="Move the thread to" data-group="move">
        <span class="muted">Move to:</span>
        {allowedTransitions(thread.status).map((s) => (
          <button type="button" class="secondary" key={s} data-transition={s} onClick={() => move(s)}>
            {s.replace(/_/g, ' ')}
          </button>
        ))}
      </div>
      <div class="row" role="group" aria-label="Snooze" data-group="snooze">
        {thread.snoozedUntil ? (
          <button type="button" class="secondary" onClick={() => snooze(null)}>
            Unsnooze
          </button>
        ) : (
          <>
            <span class="muted">Snooze:</span>
            <button type="button" class="secondary" onClick={() => snooze(inHours(4))}>
              4 hours
            </button>
            <button type="button" class="secondary" onClick={() => snooze(inHours(24))}>
              1 day
            </button>
            <button type="button" class="secondary" onClick={() => snooze(inHours(24 * 7))}>
              1 week
            </button>
          </>
        )}
      </div>
      <ErrorNote error={error} />
    </div>
  );
}

function Scores({ s }: { s: { overall: number; readability: number; personalization: number; linkQuality: number } }) {
  return (
    <div class="scores" aria-label="Judge's scores">
      {(['overall', 'readability', 'personalization', 'linkQuality'] as const).map((k) => (
        <span key={k}>
          {k === 'linkQuality' ? 'links' : k} <strong>{s[k].toFixed(2)}</strong>
        </span>
      ))}
    </div>
  );
}

function Drafts({ thread, onChanged, onToReply }: { thread: ThreadDetail; onChanged: () => Promise<void>; onToReply: (text: string) => void }) {
  const [insights, setInsights] = useState<Record<string, DraftInsight>>({});
  const [rules, setRules] = useState<{ name: string; effect: string }[]>([]);
  const [instructions, setInstructions] = useState('');
  const [variants, setVariants] = useState(1);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  // A sent draft leaves the list: what its send said is shown here, where it stays in view.
  const [sent, setSent] = useState<{ text: string; guardrails: Guardrails | null } | null>(null);
  const live = thread.drafts.filter(isOpen);
  // Text put back into an open draft's editor from an edit its old version lost (below).
  const [restored, setRestored] = useState<Record<string, Restore>>({});
  const [, setForgotten] = useState(0);
  // Drafts edited in this tab and no longer open: sent, regenerated or discarded in another tab
  // or window, or set aside by a manual reply. Their card goes, but the edit is still kept in
  // the tab (useUnsentText): it is offered back, not dropped without a word.
  const displaced = thread.drafts
    .filter((d) => !isOpen(d))
    .map((d) => ({ draft: d, text: keptUnsentText(`draft.${d.id}`) }))
    .filter((x): x is { draft: Draft; text: string } => x.text !== null && x.text !== x.draft.bodyText);
  const forget = (d: Draft) => {
    forgetUnsentText(`draft.${d.id}`);
    setForgotten((n) => n + 1);
  };
  // Insights of drafts generated before this view was opened.
  useLoad(
    async () => {
      const missing = live.filter((d) => !insights[d.id]);
      if (!missing.length) return;
      const got = await Promise.all(missing.map((d) => get<{ data: { insight: DraftInsight | null } }>(`/v1/sdr/drafts/${d.id}`)));
      const add: Record<string, DraftInsight> = {};
      got.forEach((g) => g.data.insight && (add[g.data.insight.draftId] = g.data.insight));
      if (Object.keys(add).length) setInsights((cur) => ({ ...cur, ...add }));
    },
    [live.map((d) => d.id).join()],
  );
  return (
    <section aria-labelledby="drafts-h">
      <h3 id="drafts-h">AI drafts</h3>
      <div class="row">
        <Field label="Instructions for the drafts (optional)">
          <input value={instructions} onInput={(e) => setInstructions(e.currentTarget.value)} placeholder="e.g. propose Tuesday, keep it short" />
        </Field>
        <Field label="Variants">
          <select value={String(variants)} onChange={(e) => setVariants(Number(e.currentTarget.value))}>
            <option value="1">1</option>
            <option value="2">2</option>
            <option value="3">3</option>
          </select>
        </Field>
        <button
          type="button"
          aria-disabled={busy || undefined}
          onClick={async () => {
            if (busy) return;
            setBusy(true);
            setError(undefined);
            setSent(null);
            try {
              const r = await post<{ data: { drafts: Draft[]; insights: DraftInsight[]; appliedRules: { name: string; effect: string }[] } }>('/v1/sdr/drafts/generate', {
                threadId: thread.id,
                variantCount: variants,
                ...(instructions.trim() ? { instructions: instructions.trim() } : {}),
              });
              setInsights((cur) => ({ ...cur, ...Object.fromEntries(r.data.insights.map((i) => [i.draftId, i])) }));
              setRules(r.data.appliedRules);
              await onChanged();
            } catch (e) {
              setError(e);
            } finally {
              setBusy(false);
            }
          }}
        >
          {busy ? 'Writing…' : 'Generate drafts'}
        </button>
      </div>
      <ErrorNote error={error} />
      {rules.length > 0 && (
        <p class="muted">
          Rules applied: {rules.map((r) => `${r.name} (${r.effect})`).join('; ')}
        </p>
      )}
      {sent && (
        <div class="ok" role="status" data-testid="draft-sent">
          {sent.text}
          {sent.guardrails && sent.guardrails.issues.length > 0 && (
            <>
              {' '}
              <GuardrailIssues g={sent.guardrails} />
            </>
          )}
        </div>
      )}
      {displaced.map(({ draft: d, text }) => {
        const successor = liveSuccessor(thread.drafts, d);
        return (
          <DisplacedEdit
            key={d.id}
            draft={d}
            text={text}
            by={d.supersededBy ? thread.drafts.find((x) => x.id === d.supersededBy) : undefined}
            into={successor ? `the new version (variant ${live.indexOf(successor) + 1})` : 'your reply'}
            onRestore={() => {
              if (successor) setRestored((cur) => ({ ...cur, [successor.id]: { text } }));
              else onToReply(text);
              forget(d);
            }}
            onDismiss={() => forget(d)}
          />
        );
      })}
      {live.map((d, i) => (
        <DraftCard
          key={d.id}
          draft={d}
          variant={i + 1}
          restored={restored[d.id]}
          insight={insights[d.id]}
          onInsight={(x) => setInsights((cur) => ({ ...cur, [x.draftId]: x }))}
          onSent={(text, guardrails) => setSent({ text, guardrails })}
          onChanged={onChanged}
        />
      ))}
    </section>
  );
}

/** The open draft that took this one's place (following regenerates), if any. */
function liveSuccessor(drafts: Draft[], d: Draft): Draft | undefined {
  const seen = new Set<string>();
  let next = d.supersededBy ? drafts.find((x) => x.id === d.supersededBy) : undefined;
  while (next && !isOpen(next) && next.state === 'superseded' && next.supersededBy && !seen.has(next.id)) {
    seen.add(next.id);
    next = drafts.find((x) => x.id === next!.supersededBy);
  }
  return next && isOpen(next) ? next : undefined;
}

/** Why a draft this tab was editing is no longer open. */
function displacedBecause(d: Draft, by: Draft | undefined): string {
  if (d.state === 'sent') return 'This draft was sent from another tab or window, as it was there: without the changes you made here.';
  if (d.state === 'discarded') return 'This draft was discarded in another tab or window.';
  if (!d.supersededBy) return 'A reply was written by hand and sent on this thread, so this draft was set aside: it answered a message that has been answered now.';
  if (by?.state === 'sent') return 'Another variant was sent on this thread, so this one was set aside.';
  return 'This draft was written again (regenerated) in another tab or window.';
}

/**
 * An edit typed in this tab whose draft changed elsewhere (sent, regenerated, discarded) or was
 * set aside by a manual reply: said so, with the text to copy or to put back (into the new
 * version of a regenerated draft, else into the reply written by hand).
 */
function DisplacedEdit({ draft, text, by, into, onRestore, onDismiss }: { draft: Draft; text: string; by: Draft | undefined; into: string; onRestore: () => void; onDismiss: () => void }) {
  const [copied, setCopied] = useState<'' | 'yes' | 'no'>('');
  return (
    <div class="draft" data-displaced={draft.id} role="group" aria-label="An edit of a draft that changed">
      <p class="notice" role="alert">
        {displacedBecause(draft, by)} Your unsaved edit of it is kept here: copy it, or put it into {into}.
      </p>
      <Field label="Your unsaved edit">
        <textarea rows={6} readOnly value={text} />
      </Field>
      <div class="row">
        <button type="button" onClick={onRestore}>
          Put it into {into}
        </button>
        <button type="button" class="secondary" onClick={async () => setCopied((await copyText(text)) ? 'yes' : 'no')}>
          Copy
        </button>
        <button type="button" class="secondary" onClick={onDismiss}>
          Dismiss
        </button>
      </div>
      <p aria-live="polite" class="muted">
        {copied === 'yes' ? 'Copied to the clipboard.' : copied === 'no' ? 'The browser refused the clipboard: select the text and copy it.' : ''}
      </p>
    </div>
  );
}

function GuardrailIssues({ g }: { g: Guardrails }) {
  return (
    <>
      {g.blocked ? 'Not sent: the pre-send checks blocked this draft. Fix what they found and send again.' : g.issues.length ? 'Sent, with warnings:' : ''}
      <ul>
        {g.issues.map((i, k) => (
          <li key={k}>
            <strong>{i.severity === 'block' ? 'blocks' : 'warning'}</strong>: {i.message}
          </li>
        ))}
      </ul>
      <Scores s={g.scores} />
    </>
  );
}

function DraftCard({
  draft,
  variant,
  restored,
  insight,
  onInsight,
  onSent,
  onChanged,
}: {
  draft: Draft;
  variant: number;
  /** An edit put back from an older version of this draft (DisplacedEdit). */
  restored?: Restore;
  insight?: DraftInsight;
  onInsight: (i: DraftInsight) => void;
  onSent: (text: string, guardrails: Guardrails) => void;
  onChanged: () => Promise<void>;
}) {
  const [text, setText, forget] = useUnsentText(`draft.${draft.id}`, draft.bodyText);
  const editor = useRef<HTMLTextAreaElement>(null);
  useEffect(() => {
    if (!restored) return;
    setText(restored.text);
    editor.current?.focus();
  }, [restored]);
  const [again, setAgain] = useState('');
  const [blocked, setBlocked] = useState<Guardrails | null>(null);
  const [sendError, setSendError] = useState<unknown>(undefined);
  const dirty = text !== draft.bodyText;
  // "Variant 2 · offline template": several drafts of one approach stay apart.
  const title = `Variant ${variant}${insight ? ` · ${insight.approach.replace(/_/g, ' ')}` : ''}`;
  return (
    <div class="draft" data-draft={draft.id} role="group" aria-label={title}>
      <div class="row">
        <h4 class="draft-title">{title}</h4>
        <Pill state={draft.state} />
        {insight && <span class="muted">confidence {insight.confidence.toFixed(2)}</span>}
      </div>
      {insight?.scores && <Scores s={insight.scores} />}
      {insight && <p class="muted">{insight.rationale}</p>}
      <p class="muted">Subject: {draft.subject}</p>
      <Field label="Draft text">
        <textarea ref={editor} rows={8} value={text} onInput={(e) => setText(e.currentTarget.value)} />
      </Field>
      <ActionRow>
        <Action
          label="Send this draft"
          name="Send"
          run={async () => {
            setBlocked(null);
            setSendError(undefined);
            try {
              const r = await post<{ data: { messageId: string; guardrails: Guardrails } }>(`/v1/sdr/drafts/${draft.id}/send`, dirty ? { finalBodyText: text } : {});
              forget();
              onSent('Sent from your mailbox.', r.data.guardrails);
              await onChanged();
            } catch (e) {
              if (e instanceof ApiError && e.code === 'guardrails_blocked' && e.body?.guardrails) return setBlocked(e.body.guardrails);
              if (e instanceof ApiError && e.code === 'mail_not_connected') return setSendError(e);
              throw e;
            }
          }}
        >
          Send
        </Action>
        <Action class="secondary" disabled={!dirty} run={async () => (await patch(`/v1/sdr/drafts/${draft.id}`, { bodyText: text }), forget(), await onChanged())}>
          Save edit
        </Action>
        <input aria-label={`Instructions for the new version of variant ${variant}`} value={again} placeholder="what to change" onInput={(e) => setAgain(e.currentTarget.value)} />
        <Action
          class="secondary"
          run={async () => {
            const r = await post<{ data: { draft: Draft; insight: DraftInsight } }>(`/v1/sdr/drafts/${draft.id}/regenerate`, again.trim() ? { instructions: again.trim() } : {});
            forget();
            onInsight(r.data.insight);
            await onChanged();
          }}
        >
          Regenerate
        </Action>
        <Action class="secondary" run={async () => (await del(`/v1/sdr/drafts/${draft.id}`), forget(), await onChanged())}>
          Discard
        </Action>
      </ActionRow>
      {sendError !== undefined && <SendError error={sendError} />}
      {blocked && (
        <div class="error" role="alert" data-testid="guardrails">
          <GuardrailIssues g={blocked} />
        </div>
      )}
    </div>
  );
}

/** crypto.randomUUID needs a secure context; a plain-HTTP deployment has only getRandomValues. */
function newKey(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
}

function ManualReply({
  threadId,
  openDrafts,
  restored,
  onRestored,
  onSent,
}: {
  threadId: string;
  openDrafts: number;
  /** A draft's edit put back here (DisplacedEdit), once: after what is written already. */
  restored: Restore | null;
  onRestored: () => void;
  onSent: () => Promise<void>;
}) {
  const [text, setText, forget] = useUnsentText(`reply.${threadId}`, '');
  useEffect(() => {
    if (!restored) return;
    setText(text.trim() ? `${text}\n\n${restored.text}` : restored.text);
    onRestored();
    document.getElementById('manual-reply')?.focus();
  }, [restored]);
  const [key, setKey] = useState(newKey);
  const [done, setDone] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  return (
    <form
      aria-labelledby="manual-h"
      onSubmit={async (e) => {
        e.preventDefault();
        if (busy) return;
        setError(undefined);
        setDone('');
        if (!text.trim()) return setError(new Error('Write the reply first.'));
        setBusy(true);
        // The thread's open drafts answer the message this reply answers: the send supersedes them.
        const setAside = openDrafts;
        try {
          // The same Idempotency-Key for a retried click: a repeat sends nothing twice.
          await call('POST', `/v1/sdr/threads/${threadId}/send-manual`, { bodyText: text }, { 'idempotency-key': key });
          setText('');
          forget();
          setKey(newKey());
          setDone(
            `Reply sent from your mailbox.${
              setAside === 0 ? '' : setAside === 1 ? ' The open AI draft was set aside (superseded): it answered the message you have answered now.' : ` The ${setAside} open AI drafts were set aside (superseded): they answered the message you have answered now.`
            }`,
          );
          await onSent();
        } catch (err) {
          setError(err);
        } finally {
          setBusy(false);
        }
      }}
    >
      <h3 id="manual-h">Write a reply yourself</h3>
      <label class="field">
        <span class="field-label">Your reply</span>
        <textarea id="manual-reply" rows={5} required value={text} onInput={(e) => setText(e.currentTarget.value)} />
      </label>
      <button type="submit" aria-disabled={busy || undefined}>
        Send reply
      </button>
      {done && (
        <p class="ok" role="status">
          {done}
        </p>
      )}
      <SendError error={error} />
    </form>
  );
}
