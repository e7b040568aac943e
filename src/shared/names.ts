import { ApiError } from './errors.ts';

/** Names (workspaces, campaigns, pools, sender accounts, SDRs, keys, follow-up rules): 1 to NAME_MAX characters, trimmed. */
export const NAME_MAX = 200;
export const NAME_TOO_LONG = `at most ${NAME_MAX} characters`;

/** The name trimmed; 400 naming the field when it is empty or too long (the CLI's paths, which no route schema guards). */
export function requireName(value: string, field = 'name'): string {
  const trimmed = value.trim();
  if (!trimmed) throw ApiError.invalid(`${field}: must not be empty`);
  if (trimmed.length > NAME_MAX) throw ApiError.invalid(`${field}: ${NAME_TOO_LONG}`);
  return trimmed;
}
