// The webhook events: one typed map of event names to payloads (contract §6), the order their
// fields are sent in, and one builder per event that every producer uses, so a webhook consumer
// sees one spelling whichever code path wrote the event. `message.sent` is written by the
// accepted-outcome SQL statement (sending/outcomes.ts, group-committed): its jsonb object is
// generated from the same definition (`messageSentJsonb`), and a test checks that PostgreSQL's
// object equals the TypeScript builder's.

/** What a receiver finds in `data`, per event (extra fields beyond the contract: `messageIdHeader`). */
export interface EventPayloads {
  'campaign.started': { campaignId: string; name: string; startedAt: string; resumed: boolean };
  'message.sent': { campaignId: string; leadId: string; email: string; sequenceStep: number; messageId: string; messageIdHeader: string | null; sentAt: string };
  'message.bounced': {
    campaignId: string;
    leadId: string;
    email: string;
    sequenceStep: number;
    messageId: string;
    messageIdHeader: string | null;
    bounceType: 'hard' | 'soft';
    bounceReason: string;
    bouncedAt: string;
  };
  'reply.received': { replyId: string; campaignId: string; email: string; classification: string; threadSnippet: string; receivedAt: string };
}

export type EventType = keyof EventPayloads;

/** An event ready for the outbox: its type and its payload, built by one of the builders below. */
export type OutboxEvent = { [K in EventType]: { type: K; data: EventPayloads[K] } }[EventType];

/** Each event's fields in the order they are sent (jsonb does not keep key order). */
export const EVENT_FIELDS: { [K in EventType]: ReadonlyArray<keyof EventPayloads[K] & string> } = {
  'campaign.started': ['campaignId', 'name', 'startedAt', 'resumed'],
  'message.sent': ['campaignId', 'leadId', 'email', 'sequenceStep', 'messageId', 'messageIdHeader', 'sentAt'],
  'message.bounced': ['campaignId', 'leadId', 'email', 'sequenceStep', 'messageId', 'messageIdHeader', 'bounceType', 'bounceReason', 'bouncedAt'],
  'reply.received': ['replyId', 'campaignId', 'email', 'classification', 'threadSnippet', 'receivedAt'],
};

export const EVENT_TYPES = Object.keys(EVENT_FIELDS) as ['campaign.started', 'message.sent', 'message.bounced', 'reply.received'];

/** The facts of one campaign message an event reports (camelCase, whatever row it came from). */
export interface MessageFacts {
  id: string;
  campaignId: string;
  leadId: string;
  toEmail: string;
  stepIndex: number;
  messageIdHeader: string | null;
}

export function campaignStarted(c: { id: string; name: string; startedAt: Date }, resumed: boolean): OutboxEvent {
  return { type: 'campaign.started', data: { campaignId: c.id, name: c.name, startedAt: c.startedAt.toISOString(), resumed } };
}

export function messageSent(m: MessageFacts, sentAt: Date): OutboxEvent {
  return { type: 'message.sent', data: { ...messageFields(m), sentAt: sentAt.toISOString() } };
}

/** From an SMTP rejection (sending) or a later delivery-status report (inbound): one shape. */
export function messageBounced(m: MessageFacts, bounce: { type: 'hard' | 'soft'; reason: string; at: Date }): OutboxEvent {
  return { type: 'message.bounced', data: { ...messageFields(m), bounceType: bounce.type, bounceReason: bounce.reason, bouncedAt: bounce.at.toISOString() } };
}

export function replyReceived(r: { id: string; campaignId: string; email: string; classification: string; snippet: string; receivedAt: Date }): OutboxEvent {
  return {
    type: 'reply.received',
    data: { replyId: r.id, campaignId: r.campaignId, email: r.email, classification: r.classification, threadSnippet: r.snippet, receivedAt: r.receivedAt.toISOString() },
  };
}

function messageFields(m: MessageFacts) {
  return { campaignId: m.campaignId, leadId: m.leadId, email: m.toEmail, sequenceStep: m.stepIndex, messageId: m.id, messageIdHeader: m.messageIdHeader };
}

/**
 * `message.sent`'s payload as a PostgreSQL expression over the columns that hold its facts (the
 * set-based outcome statement builds thousands of them without a round trip). The column map is
 * typed by the payload: a field added to `EventPayloads['message.sent']` does not compile until
 * the statement provides it. `sent` holds the time as `Date.toISOString()` text, as the builder
 * writes it.
 */
export function messageSentJsonb(columns: { [F in keyof EventPayloads['message.sent']]: string }): string {
  return jsonbObject('message.sent', columns);
}

function jsonbObject<K extends EventType>(type: K, columns: { [F in keyof EventPayloads[K]]: string }): string {
  const fields = EVENT_FIELDS[type] as ReadonlyArray<keyof EventPayloads[K] & string>;
  return `jsonb_build_object(${fields.map((f) => `'${f}', ${columns[f]}`).join(', ')})`;
}
