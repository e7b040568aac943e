// The SDR's own mail connection: its health, and the connect / reconnect flow.
import { get } from '../api.ts';
import type { Session } from '../api.ts';
import { Ago, ErrorNote, PageHead, Pill, useLoad } from '../ui.tsx';
import { MailConnectForm } from './sdrs.tsx';

interface MailStatus {
  connected: boolean;
  email: string | null;
  healthState: string;
  lastSyncedAt: string | null;
  lastSyncError: string | null;
}

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
            {s.connected ? 'Connected' : 'Not connected'} {s.email && <strong>{s.email}</strong>} <Pill state={s.connected ? s.healthState : 'disconnected'} label={s.connected ? undefined : 'not connected'} />
          </p>
          <p class="muted">
            Last synced: <Ago at={s.lastSyncedAt} empty="never" />
          </p>
          {s.lastSyncError && <p class="error">Last sync error: {s.lastSyncError}</p>}
          {s.healthState === 'needs_reauth' && <p class="error">Your mailbox refused mailgate's login (changed password?): reconnect below.</p>}
          {!s.connected && <p>Replies you send from mailgate go out through your own mailbox: connect it below.</p>}
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
