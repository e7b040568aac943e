import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from './config/index.ts';
import type { Clock } from './adapters/clock.ts';
import type { Crypto } from './adapters/crypto.ts';
import type { Logger } from './adapters/logger.ts';
import type { MailProbe } from './adapters/mailprobe.ts';
import type { Metrics } from './adapters/metrics.ts';
import { OpenAiCompatibleProvider, type LlmProvider } from './adapters/llm.ts';
import { sendOnce, type OutgoingMail, type SendOutcome } from './adapters/smtp.ts';
import { mailparser, type MailParser } from './adapters/mailparse.ts';

/** One message over a short-lived SMTP connection (an SDR's forward, a desk reply). */
export interface OneOffMailer {
  send(smtpUrl: string, mail: OutgoingMail): Promise<SendOutcome>;
}

/**
 * Everything a service may touch besides its EntityManager: the database, the configuration,
 * the clock, crypto, logging, metrics and every I/O adapter. Built once per process
 * (`createDeps`), injected so tests can swap any of it.
 */
export interface Deps {
  orm: MikroORM;
  config: Config;
  clock: Clock;
  crypto: Crypto;
  log: Logger;
  mailProbe: MailProbe;
  /** This process's Prometheus registry and instruments (adapters/metrics.ts). */
  metrics: Metrics;
  /**
   * The configured LLM, or null (drafts then come from the offline composer). One per process,
   * so the structured-output mode it found to work (its fallback chain) is remembered.
   */
  llm: LlmProvider | null;
  /** One-off SMTP sends made inside a request (adapters/smtp.ts `sendOnce`). */
  mailer: OneOffMailer;
  /** MIME parsing of stored messages (adapters/mailparse.ts). */
  mailParser: MailParser;
}

/** The parts a caller must give; the adapters default to the real ones. */
export type DepsInput = Omit<Deps, 'llm' | 'mailer' | 'mailParser'> & Partial<Pick<Deps, 'llm' | 'mailer' | 'mailParser'>>;

export function createDeps(input: DepsInput): Deps {
  return {
    ...input,
    llm: input.llm !== undefined ? input.llm : llmFromConfig(input.config, input.log, input.metrics),
    mailer: input.mailer ?? { send: (smtpUrl, mail) => sendOnce(smtpUrl, mail) },
    mailParser: input.mailParser ?? mailparser,
  };
}

/** The LLM the configuration names (`llmBaseUrl`), or null. */
export function llmFromConfig(config: Config, log: Logger, metrics?: Metrics): LlmProvider | null {
  if (!config.llmBaseUrl) return null;
  return new OpenAiCompatibleProvider({
    baseUrl: config.llmBaseUrl,
    apiKey: config.llmApiKey,
    model: config.llmModel,
    timeoutMs: config.llmTimeout,
    log,
    observe: metrics
      ? (outcome, seconds) => {
          metrics.llmCalls.inc({ outcome });
          metrics.llmDuration.observe({ outcome }, seconds);
        }
      : undefined,
  });
}
