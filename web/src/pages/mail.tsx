// The SDR's own mail connection: its health, and the connect / reconnect flow.
import { get } from '../api.ts';
import type { Session } from '../api.ts';
import { Ago, ErrorNote, MailPill, PageHead, useLoad } from '../ui.tsx';
import { MailConnectForm } from './sdrs.tsx';

interface MailStatus {
  connected: boolean;
  email: string | null;
  healthState: string;
  lastSyncedAt: string | null;
  lastSyncError: string | null;
}

const STATE_WORDS: Record<string, string> = {
  active: 'Connected',
  needs_reauth: 'Needs reconnecting',
  rate_limited: 'Connected, rate limited',
  disconnected: 'Not connected',
};

export function MailPage({ session }: { session: Session }) {
  const status = useLoad(() => get<{ data: MailStatus }>('/v1/sdr/mail/status'), []);
  const me = useLoad(() => get<{ data: { id: string; email: string }[] }>('/v1/sdrs'), []);
  const s = status.data?.data;
  const myEmail = me.data?.data.find((x) => x.id === session.sdrId)?.email ?? '';
  return (
    <>
      <PageHead title="Mail connection" />
      <ErrorNote error={status.error} />
      {s && (
        <section class="card" aria-labelledby="mail-status-h">
          <h2 id="mail-status-h">Status</h2>
          <p data-testid="mail-status">
            {STATE_WORDS[s.healthState] ?? s.healthState} {s.email && <strong>{s.email}</strong>} <MailPill state={s.healthState} />
          </p>
          <p class="muted">
            Last synced: <Ago at={s.lastSyncedAt} empty="never" />
          </p>
          {s.lastSyncError && <p class="error">Last sync error: {s.lastSyncError}</p>}
          {s.healthState === 'needs_reauth' && <p class="notice">Your mailbox refused mailgate's login (changed password?): replies cannot be sent until you reconnect it below.</p>}
          {s.healthState === 'rate_limited' && <p class="notice">Your mail server is limiting mailgate's logins: sending may fail for a while. If it lasts, reconnect below.</p>}
          {s.healthState === 'disconnected' && <p>Replies you send from mailgate go out through your own mailbox: connect it below.</p>}
        </section>
      )}
      {session.sdrId && (
        <section class="card">
          <MailConnectForm sdrId={session.sdrId} email={s?.email ?? myEmail} onConnected={status.reload} />
        </section>
      )}
    </>
  );
}
