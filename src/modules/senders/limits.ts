// Limits of an account's and a pool's sending settings, shared by the API's schemas and the
// CLI's options. No imports: the CLI reads it at start-up (cli/program.ts).
export const SENDER_LIMITS = { dailyLimit: 1_000_000, minIntervalSeconds: 86_400, dailyCapacity: 10_000_000 } as const;
