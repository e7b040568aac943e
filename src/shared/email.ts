// Addresses are trimmed and compared case-insensitively (contract §4, §7).
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

// A pragmatic RFC 5321 shape check: local@domain with a dot-separated domain, no spaces,
// bounded lengths. Deliverability is the SMTP server's business.
const EMAIL = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;

export function isEmail(value: string): boolean {
  const v = value.trim();
  if (v.length > 254) return false;
  const at = v.lastIndexOf('@');
  if (at < 1 || at > 64) return false;
  const local = v.slice(0, at);
  if (local.startsWith('.') || local.endsWith('.') || local.includes('..')) return false;
  return EMAIL.test(v);
}
