// Webhooks: list, create (the signing secret shown once), edit events, the delivery log with
// every attempt, retry a delivery, rotate the secret, delete.
import { useState } from 'preact/hooks';
import { del, get, patch, post, qs } from '../api.ts';
import { Link, navigate, setQuery, useLocation } from '../router.tsx';
import { Action, Ago, ErrorNote, Field, PageHead, Pager, Pill, SecretOnce, useLoad } from '../ui.tsx';
import type { Page, Webhook, WebhookDelivery } from '../types.ts';

const EVENTS = ['campaign.started', 'message.sent', 'message.bounced', 'reply.received'];

function EventChecks({ value, onChange }: { value: string[]; onChange: (v: string[]) => void }) {
  return (
    <fieldset>
      <legend>Events</legend>
      <div class="checks">
        {EVENTS.map((ev) => (
          <label key={ev}>
            <input type="checkbox" checked={value.includes(ev)} onChange={(e) => onChange(e.currentTarget.checked ? EVENTS.filter((x) => x === ev || value.includes(x)) : value.filter((x) => x !== ev))} />
            {ev}
          </label>
        ))}
      </div>
    </fieldset>
  );
}

export function WebhooksPage() {
  const list = useLoad(() => get<Page<Webhook>>('/v1/webhooks?limit=200'), []);
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>(['reply.received']);
  const [created, setCreated] = useState<Webhook | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  // One webhook per press: a double click would register two, each event then delivered twice.
  const [registering, setRegistering] = useState(false);
  return (
    <>
      <PageHead title="Webhooks" />
      <section class="card" aria-labelledby="new-webhook-h">
        <h2 id="new-webhook-h">Register a webhook</h2>
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            if (registering) return;
            setRegistering(true);
            setError(undefined);
            try {
              const w = await post<Webhook>('/v1/webhooks', { url: url.trim(), events });
              setCreated(w);
              setUrl('');
              await list.reload();
            } catch (err) {
              setError(err);
            } finally {
              setRegistering(false);
            }
          }}
        >
          <Field label="HTTPS URL">
            <input type="url" required value={url} placeholder="https://example.com/hooks/mailgate" onInput={(e) => setUrl(e.currentTarget.value)} />
          </Field>
          <EventChecks value={events} onChange={setEvents} />
          <button type="submit" disabled={events.length === 0} aria-disabled={registering || undefined}>
            Register
          </button>
          <ErrorNote error={error} />
        </form>
        {created?.signingSecret && <SecretOnce label={`Signing secret of ${created.url}`} value={created.signingSecret} onDone={() => setCreated(null)} />}
      </section>
      <section class="card" aria-labelledby="webhooks-h">
        <h2 id="webhooks-h">Webhooks</h2>
        <ErrorNote error={list.error} />
        {list.data?.total === 0 && <p>No webhooks: register one to receive events as signed HTTPS POSTs.</p>}
        {list.data && list.data.total > 0 && (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">URL</th>
                  <th scope="col">events</th>
                  <th scope="col">state</th>
                  <th scope="col">created</th>
                </tr>
              </thead>
              <tbody>
                {list.data.data.map((w) => (
                  <tr key={w.id}>
                    <td>
                      <Link href={`/webhooks/${w.id}`}>{w.url}</Link>
                    </td>
                    <td>{w.events.join(', ')}</td>
                    <td>
                      <Pill state={w.status} />
                    </td>
                    <td>
                      <Ago at={w.createdAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </>
  );
}

const PAGE = 25;

export function WebhookPage({ id }: { id: string }) {
  const { query } = useLocation();
  const state = query.get('state') ?? '';
  const offset = Number(query.get('offset') ?? 0) || 0;
  const hook = useLoad(() => get<Webhook>(`/v1/webhooks/${id}`), [id]);
  const deliveries = useLoad(() => get<Page<WebhookDelivery>>(`/v1/webhooks/${id}/deliveries${qs({ state, limit: PAGE, offset })}`), [id, state, offset], 10_000);
  const [events, setEvents] = useState<string[] | null>(null);
  const [secret, setSecret] = useState('');
  const w = hook.data;
  if (hook.error && !w) {
    return (
      <>
        <PageHead title="Webhook" />
        <ErrorNote error={hook.error} />
      </>
    );
  }
  if (!w) return <p class="loading">Loading…</p>;
  const ev = events ?? w.events;
  return (
    <>
      <PageHead title={`Webhook ${w.url}`}>
        <Pill state={w.status} />
        <Action class="secondary" run={async () => (await patch(`/v1/webhooks/${id}`, { status: w.status === 'active' ? 'disabled' : 'active' }), await Promise.all([hook.reload(), deliveries.reload()]))}>
          {w.status === 'active' ? 'Disable' : 'Enable'}
        </Action>
        <Action
          class="secondary"
          confirm={{ title: `Rotate the signing secret of ${w.url}?`, body: 'The old secret stops signing at once: the receiver must verify with the new one, shown once after this.', yes: 'Rotate the secret' }}
          run={async () => setSecret((await post<Webhook>(`/v1/webhooks/${id}/rotate-secret`)).signingSecret ?? '')}
        >
          Rotate secret
        </Action>
        <Action
          class="danger"
          confirm={{ title: `Delete the webhook ${w.url}?`, body: 'No more events are sent to it, and its delivery log is deleted with it.', yes: 'Delete the webhook' }}
          run={async () => {
            await del(`/v1/webhooks/${id}`);
            navigate('/webhooks');
          }}
        >
          Delete
        </Action>
      </PageHead>
      <p class="muted">
        <code>{w.id}</code> · created <Ago at={w.createdAt} />
      </p>
      {secret && <SecretOnce label="New signing secret" value={secret} onDone={() => setSecret('')} />}
      <section class="card" aria-labelledby="events-h">
        <h2 id="events-h">Subscribed events</h2>
        <EventChecks value={ev} onChange={setEvents} />
        <Action
          disabled={events === null || ev.length === 0}
          run={async () => {
            await patch(`/v1/webhooks/${id}`, { events: ev });
            await hook.reload();
            setEvents(null);
          }}
        >
          Save events
        </Action>
      </section>
      <section class="card" aria-labelledby="deliveries-h">
        <h2 id="deliveries-h">Deliveries</h2>
        <Field label="State">
          <select value={state} onChange={(e) => setQuery({ state: e.currentTarget.value || null, offset: null })}>
            <option value="">all</option>
            <option value="pending">pending</option>
            <option value="delivered">delivered</option>
            <option value="failed">failed</option>
          </select>
        </Field>
        <ErrorNote error={deliveries.error} />
        {deliveries.data?.total === 0 && <p>No deliveries{state ? ` ${state}` : ' yet'}.</p>}
        {deliveries.data?.data.map((d) => (
          <article class="card" key={d.id} data-delivery={d.id} aria-label={`Delivery ${d.event} ${d.id}`}>
            <div class="row">
              <strong>{d.event}</strong>
              <Pill state={d.state} />
              <span class="muted">
                created <Ago at={d.createdAt} />
                {d.nextAttemptAt && (
                  <>
                    {' '}
                    · next attempt <Ago at={d.nextAttemptAt} />
                  </>
                )}
                {d.state === 'pending' && !d.nextAttemptAt && ' · held while the webhook is disabled: enable it to send'}
              </span>
              <span class="page-actions">
                {d.state !== 'delivered' && (
                  <Action label={`Retry now: delivery ${d.id}`} disabled={w.status !== 'active'} run={async () => (await post(`/v1/webhooks/${id}/deliveries/${d.id}/retry`), await deliveries.reload())}>
                    Retry now
                  </Action>
                )}
              </span>
            </div>
            <table>
              <caption class="sr-only">Attempts of delivery {d.id}</caption>
              <thead>
                <tr>
                  <th scope="col">#</th>
                  <th scope="col">time</th>
                  <th scope="col">answer</th>
                  <th scope="col" class="num">took</th>
                </tr>
              </thead>
              <tbody>
                {d.attempts.length === 0 && (
                  <tr>
                    <td colSpan={4} class="muted">
                      no attempt yet
                    </td>
                  </tr>
                )}
                {d.attempts.map((a, i) => (
                  <tr key={i}>
                    <td>{i + 1}</td>
                    <td>
                      <Ago at={a.at} />
                    </td>
                    <td>
                      {a.statusCode !== null && <Pill state={a.statusCode >= 200 && a.statusCode < 300 ? 'delivered' : 'failed'} label={`HTTP ${a.statusCode}`} />} {a.error && <code>{a.error}</code>}
                    </td>
                    <td class="num">{a.durationMs} ms</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </article>
        ))}
        {deliveries.data && deliveries.data.total > 0 && <Pager label="Deliveries" total={deliveries.data.total} limit={PAGE} offset={offset} onChange={(o) => setQuery({ offset: o || null })} />}
      </section>
    </>
  );
}
