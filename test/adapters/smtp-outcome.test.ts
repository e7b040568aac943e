import assert from 'node:assert/strict';
import { classifySmtpError } from '../../src/adapters/smtp.ts';

// A mail server's answer is stored in text columns (last_error, smtp_response): PostgreSQL
// refuses NUL in text, so a hostile or broken server must not be able to fail the outcome.
describe('SMTP outcomes are storable text', () => {
  it('drops NUL and replaces lone surrogates in a refusal', () => {
    const outcome = classifySmtpError({ responseCode: 550, response: '550 no\u0000 such \ud800user' });
    assert.equal(outcome.kind, 'rejected');
    assert.equal(outcome.response, '550 no such \ufffduser');
  });

  it('keeps the first 1,000 characters of a long answer', () => {
    const outcome = classifySmtpError({ responseCode: 451, response: '451 ' + 'x'.repeat(5000) });
    assert.equal(outcome.kind, 'temporary');
    assert.equal(outcome.response.length, 1000);
  });
});
