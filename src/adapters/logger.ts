import { pino, type Logger } from 'pino';

export type { Logger };

// Credentials never reach the logs: any field with one of these names is redacted.
const REDACT = ['*.password', '*.apiKey', '*.llmApiKey', '*.smtpUrl', '*.imapUrl', '*.smtp', '*.imap', '*.key', '*.authorization', 'req.headers.authorization'];

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    { level, base: { service: 'mailgate' }, redact: { paths: REDACT, censor: '[redacted]' }, timestamp: pino.stdTimeFunctions.isoTime },
    destination ?? process.stdout,
  );
}
