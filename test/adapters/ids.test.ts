import assert from 'node:assert/strict';
import { idFromDigest, newId, orderedIds } from '../../src/adapters/ids.ts';

describe('ids (src/adapters/ids.ts)', () => {
  it('orderedIds: the same form as newId, unique, sorting as text in the order they were made', async () => {
    const made: string[] = [];
    for (let round = 0; round < 5; round++) {
      made.push(...orderedIds('enr', 2_000));
      await new Promise((r) => setTimeout(r, 2));
    }
    const form = /^enr_[a-z2-7]{26}$/;
    assert.ok(form.test(newId('enr')));
    assert.ok(made.every((id) => form.test(id)), 'every id has newId\'s form');
    assert.equal(new Set(made).size, made.length, 'no id twice');
    const sorted = [...made].sort();
    assert.deepEqual(sorted, made, 'code-unit (C collation) order is creation order');
    const linguistic = [...made].sort((a, b) => a.localeCompare(b, 'en'));
    assert.deepEqual(linguistic, made, 'so is a linguistic collation\'s');
  });

  it('ids are base32 of their bytes (RFC 4648 alphabet, lower case, no padding)', () => {
    // Vectors from Python's base64.b32encode.
    assert.equal(idFromDigest('msg', Buffer.from('foobarfoobarfoob')), 'msg_mzxw6ytbojtg633cmfzgm33pmi');
    assert.equal(idFromDigest('evt', Buffer.from('fafbfcfdfeff00010203040506070809', 'hex')), 'evt_7l57z7p674aacaqdaqcqmbyibe');
    assert.equal(idFromDigest('lead', Buffer.alloc(16, 0xff)), `lead_${'7'.repeat(25)}4`);
    assert.equal(idFromDigest('lead', Buffer.alloc(16)), `lead_${'a'.repeat(26)}`);
  });

  it('orderedIds: n = 0 gives none', () => {
    assert.deepEqual(orderedIds('lead', 0), []);
  });
});
