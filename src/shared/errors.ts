// The one error type of the API. Rendered by http/errors.ts into the contract's envelope:
// {"error": {"code", "message"}} plus any extras (errors, icpFailed, allowedTransitions, ...).
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extras: Record<string, unknown> = {},
    /** Seconds to wait before trying again, sent as `Retry-After` (a 503). */
    readonly retryAfter?: number,
  ) {
    super(message);
  }

  static invalid(message: string, extras?: Record<string, unknown>): ApiError {
    return new ApiError(400, 'invalid_request', message, extras);
  }

  static notFound(resource: string, message = `${resource.replace(/_/g, ' ')} not found`): ApiError {
    return new ApiError(404, `${resource}_not_found`, message);
  }
}

export type FieldError = { index?: number; field?: string; value?: unknown; message: string };

/**
 * A start-up failure worded for the operator: one line saying what is wrong and what to change
 * (a directory, a command, a setting). The CLI prints its message as is.
 */
export class StartupError extends Error {}
