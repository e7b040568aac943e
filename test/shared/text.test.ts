import assert from 'node:assert/strict';
import fc from 'fast-check';
import { fieldPath, findTextViolation, MAX_JSON_DEPTH, textProblem } from '../../src/shared/text.ts';

/**
 * The rule as it reads, walked the plain way (every value visited with its full path, an
 * object's keys before its values, in document order): what findTextViolation must answer.
 */
function reference(value: unknown, path: PropertyKey[], depth: number, maxDepth: number): { field: string; message: string } | null {
  if (typeof value === 'string') {
    const nul = value.includes('\u0000');
    const lone = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(value);
    return nul || lone ? { field: fieldPath(path), message: textProblem(value)! } : null;
  }
  if (typeof value === 'number') return Number.isFinite(value) ? null : { field: fieldPath(path), message: 'is a number beyond what a double holds (about ±1.8e308)' };
  if (value === null || typeof value !== 'object') return null;
  if (depth >= maxDepth) return { field: fieldPath(path), message: `nests deeper than ${maxDepth} levels of objects and arrays` };
  const entries: Array<[PropertyKey, unknown]> = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  if (!Array.isArray(value)) {
    for (const [k] of entries) if (textProblem(k as string)) return { field: 'key', message: 'key' };
  }
  for (const [k, v] of entries) {
    const found = reference(v, [...path, k], depth + 1, maxDepth);
    if (found) return found;
  }
  return null;
}

describe('the text rule (src/shared/text.ts)', () => {
  it('textProblem: NUL and lone surrogates refused, pairs and other text let through', () => {
    assert.equal(textProblem('plain ascii, émoji 😀 and 中文'), null);
    assert.match(textProblem('a\u0000b')!, /NUL/);
    assert.match(textProblem('\ud800')!, /lone UTF-16 surrogate/);
    assert.match(textProblem('x\udc00')!, /lone UTF-16 surrogate/);
    assert.match(textProblem('😀'.slice(0, 1) + 'a')!, /lone UTF-16 surrogate/);
    assert.equal(textProblem('\ud83d\ude00'), null);
  });

  it('findTextViolation names the first offending field in document order, as the plain walk does', () => {
    const text = fc.string({ unit: fc.constantFrom('a', 'é', '\u0000', '\ud800', '\udc00', '\ud83d\ude00', '😀') as fc.Arbitrary<string>, maxLength: 4 });
    const leaf = fc.oneof(text, fc.integer(), fc.constantFrom(Infinity, -Infinity, 1.5, true, false, null));
    const key = fc.oneof(fc.constantFrom('a', 'b', 'email', 'firstName'), text);
    const json = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('array'), tie('object')),
      array: fc.array(tie('value'), { maxLength: 4 }),
      object: fc.dictionary(key, tie('value'), { maxKeys: 4 }),
    })).value;
    fc.assert(
      fc.property(json, fc.integer({ min: 1, max: 5 }), (value, maxDepth) => {
        const got = findTextViolation(value, [], maxDepth);
        const want = reference(value, [], 0, maxDepth);
        if (want === null) return assert.equal(got, null);
        assert.ok(got, 'a violation found');
        // A refused key: its own path and message (displayable), checked below by example.
        if (want.field === 'key') return assert.match(got.message, /^field name /);
        assert.deepEqual(got, want);
      }),
      { numRuns: 2000 },
    );
  });

  it('findTextViolation: paths, a refused key, a prefix and the depth limit', () => {
    assert.deepEqual(findTextViolation({ leads: [{ email: 'a@b.c' }, { email: 'x\u0000' }] }), { field: 'leads[1].email', message: textProblem('\u0000') });
    assert.deepEqual(findTextViolation({ ok: 1, ['k\u0000']: 'v' }, ['leads', 2]), { field: 'leads[2].k\\u0000', message: `field name ${textProblem('\u0000')}` });
    let deep: unknown = 'x';
    for (let i = 0; i < 10_000; i++) deep = [deep];
    assert.deepEqual(findTextViolation(deep), { field: '[0]'.repeat(MAX_JSON_DEPTH), message: `nests deeper than ${MAX_JSON_DEPTH} levels of objects and arrays` });
    assert.equal(findTextViolation({ a: [1, 'two', { three: null }] }), null);
  });
});
