import { simpleParser, type ParsedMail } from 'mailparser';

export type { ParsedMail };

/** Parses one stored RFC 5322 message (mailparser): the SDR desk's forwards read it. */
export interface MailParser {
  parse(raw: Buffer): Promise<ParsedMail>;
}

export const mailparser: MailParser = { parse: (raw) => simpleParser(raw) };
