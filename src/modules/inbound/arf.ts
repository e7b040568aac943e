import type { BounceCandidate, BounceVerdict, ComplaintInfo } from './reports.ts';

export type { ComplaintInfo };

// Feedback-loop complaints (RFC 5965 ARF): a mailbox provider tells the sender that a recipient
// marked one of its messages as spam. The report is a multipart/report; report-type=feedback-report
// with a human part, a message/feedback-report part (Feedback-Type, User-Agent, Version,
// Original-Mail-From, Original-Rcpt-To, Arrival-Date, ...) and the message or its headers.

// Tried only where a run of local-part characters starts (bounces.ts: linear in the text).
const EMAIL = /(?<![A-Za-z0-9._%+'=!#$&*/?^`{|}~-])[A-Za-z0-9._%+'=!#$&*/?^`{|}~-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/;

/**
 * A complaint verdict for a feedback report. `not-spam` (a user taking a message out of the spam
 * folder) is the opposite of a complaint and is ignored, as is a report that names no feedback
 * type at all (then it is not RFC 5965 and guessing would suppress an address for nothing).
 */
export function detectComplaint(mail: BounceCandidate, ids: string[], originalTo: string | null): BounceVerdict {
  const part = mail.parts.find((p) => p.contentType === 'message/feedback-report');
  const fields = part ? fieldsOf(part.content) : new Map<string, string>();
  const feedbackType = fields.get('feedback-type')?.toLowerCase().trim() ?? null;
  if (!feedbackType) return { kind: 'ignored', decidedBy: 'arf:no-feedback-type', confidence: 0.9, reason: 'feedback report without a Feedback-Type' };
  if (feedbackType === 'not-spam') return { kind: 'ignored', decidedBy: 'arf:not-spam', confidence: 0.99, reason: 'feedback report: not spam' };
  const rcpt = fields.get('original-rcpt-to') ?? fields.get('removal-recipient') ?? null;
  const recipient = (rcpt ? EMAIL.exec(rcpt)?.[0].toLowerCase() : null) ?? originalTo;
  const reportedIds = [...(fields.get('original-message-id')?.match(/<[^<>\s]+>/g) ?? [])];
  const all = [...new Set([...ids.slice(0, 1), ...reportedIds, ...ids.slice(1)])];
  return {
    kind: 'complaint',
    decidedBy: `arf:rfc5965:${feedbackType}`,
    confidence: 0.99,
    complaint: { feedbackType, userAgent: fields.get('user-agent') ?? null, originalMessageId: all[0] ?? null, originalMessageIds: all, recipient },
  };
}

function fieldsOf(content: string): Map<string, string> {
  const fields = new Map<string, string>();
  let current: string | null = null;
  for (const line of content.replace(/\r\n?/g, '\n').split('\n')) {
    if (/^[ \t]/.test(line) && current) {
      fields.set(current, `${fields.get(current)} ${line.trim()}`);
      continue;
    }
    const m = /^([A-Za-z][A-Za-z0-9-]*)\s*:\s*(.*)$/.exec(line);
    current = m && !fields.has(m[1].toLowerCase()) ? m[1].toLowerCase() : null;
    if (m && current) fields.set(current, m[2].trim());
  }
  return fields;
}
