/**
 * A record's own value for a key, never one inherited from Object.prototype: a lookup keyed by
 * outside text (a template token, a CSS value in a prospect's mail) must not find
 * `constructor`, `toString` or `__proto__` on a plain object.
 */
export function own<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}
