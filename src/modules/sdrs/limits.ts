// Limits of the SDR desk's settings, shared by the service and the CLI's options. No imports:
// the CLI reads it at start-up (cli/program.ts).

/** The most follow-ups a follow-up rule may send per thread. */
export const MAX_FOLLOWUP_ATTEMPTS = 100;
