import assert from 'node:assert/strict';
import { newId, orderedIds } from '../../src/adapters/ids.ts';

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

  it('orderedIds: n = 0 gives none', () => {
    assert.deepEqual(orderedIds('lead', 0), []);
  });
});
