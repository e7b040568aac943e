// How a reply's subject is read (classifier.ts, model.ts): "Re: <our subject>" is our own
// wording and says nothing about the lead; an auto-responder's subject names itself.

/** Reply and forward prefixes, also with a fullwidth colon (CJK clients: "回复：", "返信:"). */
const REPLY_PREFIX = /^\s*(re|aw|antw|antwort|sv|vs|r|rif|res|resp|fw|fwd|wg|tr|enc|doorst|回复|答复|返信)\s*(\[\d+\])?\s*[:：]\s*/i;

/**
 * A tag a mail gateway or a ticket system puts before the subject of mail from outside:
 * "[EXTERNAL]", "[EXT]", "*EXTERNAL*", "(External)", "EXT:", "[Ticket #123]".
 */
const SUBJECT_TAG = /^\s*(\[[^[\]\n]{1,40}\]|\([^()\n]{1,40}\)|\*{1,3}[^*\n]{1,40}\*{1,3}|(ext|extern|external|externe|externo)\s*[:：])\s*/i;

export interface SubjectParts {
  /** A reply or forward prefix was found, after any number of tags. */
  isReply: boolean;
  /** For a reply, the tags before its first prefix ("[Auto-Reply] Re: ..."); else the whole subject. */
  lead: string;
  /** The subject without its leading tags and prefixes. */
  own: string;
}

/**
 * "[EXTERNAL] RE: <our subject>" is a reply as much as "RE: <our subject>": the mailbox's own
 * gateway tags mail from outside (Exchange transport rules, Google Workspace, Mimecast), so with
 * such a gateway every reply arrives tagged, and its subject is still our own wording. What an
 * auto-responder puts before the prefix ("[Auto-Reply] Re: ...") stays for the caller to read.
 */
export function readSubject(subject: string): SubjectParts {
  let rest = subject;
  let lead = '';
  let isReply = false;
  // Bounded: a subject is one header line, and each round removes at least one character.
  for (let round = 0; round < 20; round++) {
    const prefix = REPLY_PREFIX.exec(rest);
    if (prefix) {
      isReply = true;
      rest = rest.slice(prefix[0].length);
      continue;
    }
    const tag = SUBJECT_TAG.exec(rest);
    if (!tag) break;
    if (!isReply) lead += tag[0];
    rest = rest.slice(tag[0].length);
  }
  return { isReply, lead: isReply ? lead : subject, own: rest };
}
