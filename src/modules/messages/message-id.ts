import type { Crypto } from '../../adapters/crypto.ts';

// The Message-ID of a campaign message: `<msg_<id>.<tag>@<sending domain>>`, the tag an HMAC of
// the message's id under the secret key. Every attempt of a message carries the same id and tag
// (a message sent again after a crash, perhaps through another account, so another domain),
// and an answer or a bounce report naming any copy finds the message by its id. Until
// 2026-11-29 the tag was random per attempt and only the last copy's header was stored: an
// answer to a copy sent before a worker was killed matched nothing and was lost (a crash probe
// lost 5 of 249: two hard bounces not suppressed, an unsubscribe and a "not interested" that
// still got the next step).

const TAG_PURPOSE = 'campaign message-id';

function tagOf(crypto: Crypto, id: string): string {
  return crypto.digest(TAG_PURPOSE, id).subarray(0, 6).toString('hex');
}

export function campaignMessageId(crypto: Crypto, id: string, domain: string): string {
  return `<${id}.${tagOf(crypto, id)}@${domain}>`;
}

const SHAPE = /^<(msg_[a-z0-9]{1,64})\.([0-9a-f]{12})@[^<>@\s]+>$/;

/**
 * The id of our message each Message-ID names, when it is one of ours by its tag (a forged or
 * older one, with a random tag, is null: it is found by the stored header alone).
 */
export function messageIdsNamed(crypto: Crypto, headers: string[]): Array<string | null> {
  return headers.map((h) => {
    const m = SHAPE.exec(h);
    return m && tagOf(crypto, m[1]) === m[2] ? m[1] : null;
  });
}
