import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Crypto } from '../../src/adapters/crypto.ts';
import { campaignMessageId, messageIdsNamed } from '../../src/modules/messages/message-id.ts';

describe("a campaign message's Message-ID", () => {
  const crypto = new Crypto(randomBytes(32));
  const id = 'msg_0661676c50c3570000000151181959';

  it('is the same for every attempt of the message; only the domain follows the sending account', () => {
    const a = campaignMessageId(crypto, id, 'alpha.example');
    assert.equal(campaignMessageId(crypto, id, 'alpha.example'), a);
    assert.match(a, /^<msg_0661676c50c3570000000151181959\.[0-9a-f]{12}@alpha\.example>$/);
    assert.equal(campaignMessageId(crypto, id, 'gamma.example'), a.replace('@alpha.example', '@gamma.example'));
  });

  it('names its message only with the right tag: a forged or another key\'s tag, or another shape, names none', () => {
    const ours = campaignMessageId(crypto, id, 'alpha.example');
    const otherKey = campaignMessageId(new Crypto(randomBytes(32)), id, 'alpha.example');
    const forged = ours.replace(/\.[0-9a-f]{12}@/, '.000000000000@');
    assert.deepEqual(messageIdsNamed(crypto, [ours, otherKey, forged, '<r1@lead.example>', `${ours} `, `<${id}@alpha.example>`]), [id, null, null, null, null, null]);
  });
});
