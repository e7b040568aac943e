import { OpenAiCompatibleProvider, type LlmProvider } from '../../adapters/llm.ts';
import type { Config } from '../../config/index.ts';
import type { Logger } from '../../adapters/logger.ts';
import type { Metrics } from '../../adapters/metrics.ts';

// One provider per loaded configuration, so the structured-output mode it found to work (its
// fallback chain) is remembered across requests.
const providers = new WeakMap<Config, LlmProvider | null>();

/** The configured LLM, or null: drafts then come from the offline composer. */
export function llmFor(config: Config, log: Logger, metrics?: Metrics): LlmProvider | null {
  if (!providers.has(config)) {
    providers.set(
      config,
      config.llmBaseUrl
        ? new OpenAiCompatibleProvider({ baseUrl: config.llmBaseUrl, apiKey: config.llmApiKey, model: config.llmModel,
            timeoutMs: config.llmTimeout,
            log,
            observe: metrics
              ? (outcome, seconds) => {
                  metrics.llmCalls.inc({ outcome });
                  metrics.llmDuration.observe({ outcome }, seconds);
                }
              : undefined,
          })
        : null,
    );
  }
  return providers.get(config)!;
}
