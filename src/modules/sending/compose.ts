import type { Config } from '../../config/index.ts';
import { publicUrl } from '../../config/index.ts';
import type { Crypto } from '../../adapters/crypto.ts';
import type { OutgoingMail } from '../../adapters/smtp.ts';
import type { HeadersRow, SendingRow } from '../messages/send.ts';
import { campaignMessageId } from '../messages/message-id.ts';
import { renderHtml, renderSubject, renderText, withOpenPixel, replySubject, type LeadValues } from './render.ts';
import type { ClaimedMessage, SentMessage } from './outcomes.ts';

// Rendering one claimed message: tokens, the text part, Message-ID, the unsubscribe headers and
// link, threading headers from the lead's earlier messages, the open pixel; the account's SMTP
// URL decrypted.

/** A claimed message rendered and ready for its SMTP transaction. */
export interface ReadyMessage {
  message: SentMessage;
  mail: OutgoingMail;
  smtpUrl: string;
  /** performance.now() when the claim committed (the claim-to-send lag metric). */
  claimedAt?: number;
}

/** The subject and threading headers of a message, as its every attempt carries them. */
export interface MessageHeaders {
  subject: string;
  inReplyTo: string | null;
  /** The lead's earlier messages' Message-IDs, oldest first. */
  references: string[];
}

/**
 * The step's subject rendered for the lead, or for a follow-up without one "Re:" the last
 * message's, and In-Reply-To and References from the lead's earlier messages: what
 * composeMessage sends, and what an answered copy whose outcome was never recorded is given
 * (inbound/service.ts).
 */
export function headersOf(row: HeadersRow, deps: { config: Config; crypto: Crypto }): MessageHeaders {
  const { lead, extra } = personalization(row, deps);
  return threading(row, lead, extra);
}

function personalization(row: HeadersRow, deps: { config: Config; crypto: Crypto }) {
  const lead: LeadValues = { email: row.email, firstName: row.first_name, lastName: row.last_name, company: row.company, jobTitle: row.job_title, custom: row.custom ?? {} };
  const base = publicUrl(deps.config);
  const unsubscribeUrl = `${base}/u/${deps.crypto.sign(`u.${row.id}`)}`;
  return { lead, base, unsubscribeUrl, extra: { unsubscribeUrl } };
}

function threading(row: HeadersRow, lead: LeadValues, extra: Record<string, string>): MessageHeaders {
  const previous = row.previous ?? [];
  const last = previous[previous.length - 1];
  let subject = renderSubject(row.step_subject!, lead, extra);
  if (!subject && last) subject = replySubject(last.subject);
  return { subject, inReplyTo: last?.mid ?? null, references: previous.map((p) => p.mid) };
}

export function composeMessage(row: SendingRow, smtpUrl: string, deps: { config: Config; crypto: Crypto }): ReadyMessage {
  const { lead, base, unsubscribeUrl, extra } = personalization(row, deps);
  const { subject, inReplyTo, references } = threading(row, lead, extra);
  let html = renderHtml(row.step_body!, lead, extra);
  const text = renderText(row.step_body!, lead, extra);
  if (row.track_opens) html = withOpenPixel(html, `${base}/t/o/${deps.crypto.sign(`o.${row.id}`)}`);
  const domain = row.from_email.split('@')[1] ?? 'mailgate.local';
  // The same for every attempt of the message (messages/message-id.ts).
  const messageIdHeader = campaignMessageId(deps.crypto, row.id, domain);
  const mail: OutgoingMail = {
    from: { name: row.from_name, address: row.from_email },
    to: row.to_email,
    subject,
    html,
    text,
    messageId: messageIdHeader,
    inReplyTo: inReplyTo ?? undefined,
    references: references.length ? references : undefined,
    headers: {
      'List-Unsubscribe': `<${unsubscribeUrl}>, <mailto:${row.from_email}?subject=unsubscribe>`,
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    },
  };
  return {
    message: {
      ...claimedOf(row),
      messageIdHeader,
      subject,
      inReplyTo,
      references: references.length ? references.join(' ') : null,
    },
    mail,
    smtpUrl,
  };
}

export function claimedOf(row: SendingRow): ClaimedMessage {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    campaignId: row.campaign_id,
    enrollmentId: row.enrollment_id,
    leadId: row.lead_id,
    stepIndex: row.step_index,
    toEmail: row.to_email,
    senderAccountId: row.sender_account_id,
  };
}
