// The shapes of delivery-status and feedback reports as bounces.ts and arf.ts recognize them.

export interface BounceInfo {
  type: 'hard' | 'soft';
  status: string | null;
  reason: string;
  /** The first of originalMessageIds. */
  originalMessageId: string | null;
  /** Every Message-ID the report names for the original, most reliable route first. */
  originalMessageIds: string[];
  recipient: string | null;
}

export interface ComplaintInfo {
  /** abuse, fraud, virus, other, not-spam (RFC 5965 §7.3); lower-cased. */
  feedbackType: string;
  userAgent: string | null;
  originalMessageId: string | null;
  originalMessageIds: string[];
  /** Original-Rcpt-To, else the To of the returned message (often redacted by the provider). */
  recipient: string | null;
}

export type BounceVerdict =
  | { kind: 'bounce'; bounce: BounceInfo; decidedBy: string; confidence: number }
  | { kind: 'complaint'; complaint: ComplaintInfo; decidedBy: string; confidence: number }
  | { kind: 'ignored'; decidedBy: string; confidence: number; reason: string };

/** What bounce detection needs of a parsed message. */
export interface BounceCandidate {
  fromAddress: string | null;
  fromName: string | null;
  subject: string;
  /** The `report-type` of a multipart/report, lower-cased. */
  reportType: string | null;
  /** Return-Path is `<>` (the null sender every DSN uses). */
  nullSender: boolean;
  /** Lower-cased header name to its (first) raw value. */
  header(name: string): string | null;
  /** The human-readable text (text/plain, or the HTML part as text). */
  text: string;
  /** Non-text parts: message/delivery-status, message/rfc822, text/rfc822-headers, ... */
  parts: Array<{ contentType: string; content: string }>;
  inReplyTo: string | null;
}
