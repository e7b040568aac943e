import assert from 'node:assert/strict';
import pg from 'pg';
import { EVENT_FIELDS, EVENT_TYPES, messageBounced, messageSent, type MessageFacts } from '../../src/modules/events/catalogue.ts';
import { MESSAGE_SENT_DATA } from '../../src/modules/messages/transitions.ts';
import { envelope } from '../../src/modules/webhooks/payload.ts';

/**
 * One definition per event: the payload PostgreSQL builds for message.sent (the accepted
 * outcome's statement) is the TypeScript builder's, field for field and in the same order once
 * enveloped, so a webhook consumer cannot tell which path wrote it.
 */
describe('events: one builder per event', () => {
  let admin: pg.Client;
  before(async () => {
    admin = new pg.Client({ connectionString: process.env.MAILGATE_TEST_ADMIN_URL });
    await admin.connect();
  });
  after(() => admin.end());

  const facts: MessageFacts = { id: 'msg_1', campaignId: 'cmp_1', leadId: 'lead_1', toEmail: 'Ann@Lead.example', stepIndex: 2, messageIdHeader: '<msg_1.abc@acme.example>' };
  const sentAt = new Date('2026-05-04T10:00:01.234Z');

  it('message.sent from the SQL statement equals the builder, and enveloped bytes are identical', async () => {
    // The expression the accepted-outcome statement (markSent) embeds, over its columns.
    const expr = MESSAGE_SENT_DATA;
    const { rows } = await admin.query(
      `select ${expr} as data
         from (values ($1::text, $2::text, $3::text, $4::int, $5::text, $6::text, $7::text))
           as m(id, campaign_id, lead_id, step_index, to_email, message_id_header, sent)`,
      [facts.id, facts.campaignId, facts.leadId, facts.stepIndex, facts.toEmail, facts.messageIdHeader, sentAt.toISOString()],
    );
    const built = messageSent(facts, sentAt);
    assert.deepEqual(rows[0].data, built.data);
    const env = (data: Record<string, unknown>) => envelope({ eventId: 'evt_1', event: 'message.sent', eventCreatedAt: sentAt, webhookId: 'wh_1', data }).toString('utf8');
    assert.equal(env(rows[0].data), env(built.data));
    assert.deepEqual(Object.keys(JSON.parse(env(rows[0].data)).data), EVENT_FIELDS['message.sent']);
  });

  it('message.bounced has one spelling whatever produced it, the contract fields in order', () => {
    const e = messageBounced(facts, { type: 'hard', reason: '550 5.1.1 no such user', at: sentAt });
    assert.equal(e.type, 'message.bounced');
    assert.deepEqual(Object.keys(e.data), EVENT_FIELDS['message.bounced']);
    assert.deepEqual(e.data, {
      campaignId: 'cmp_1',
      leadId: 'lead_1',
      email: 'Ann@Lead.example',
      sequenceStep: 2,
      messageId: 'msg_1',
      messageIdHeader: '<msg_1.abc@acme.example>',
      bounceType: 'hard',
      bounceReason: '550 5.1.1 no such user',
      bouncedAt: '2026-05-04T10:00:01.234Z',
    });
  });

  it('the catalogue names the four events of the contract', () => {
    assert.deepEqual(EVENT_TYPES, ['campaign.started', 'message.sent', 'message.bounced', 'reply.received']);
  });
});
