import { readFile } from 'node:fs/promises';
import { ApiError } from '../shared/errors.ts';
import { textProblem } from '../shared/text.ts';

/**
 * The API's text rule (shared/text.ts) for command-line input: an argument with a NUL or a lone
 * surrogate is refused before any command runs. (Arguments from a shell cannot hold a NUL, but
 * runCli is also called with arrays built in code.)
 */
export function refusedArgument(argv: string[]): string | null {
  for (const [i, arg] of argv.entries()) {
    const problem = textProblem(arg);
    if (problem) {
      const name = arg.startsWith('--') ? arg.split('=')[0] : i > 0 && argv[i - 1].startsWith('--') ? argv[i - 1] : `argument ${i + 1}`;
      return `${JSON.stringify(name).slice(1, -1)}: ${problem}`;
    }
  }
  return null;
}

/** A text file named by an option, as strict UTF-8 obeying the text rule; else a one-line error. */
export async function readTextFile(option: string, file: string): Promise<string> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (err) {
    // Not a malformed argument (exit 1, like classify's missing file): the file is not there.
    throw new Error(`${option}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw ApiError.invalid(`${option}: ${file} is not valid UTF-8 text`);
  }
  const problem = textProblem(text);
  if (problem) throw ApiError.invalid(`${option}: the text of ${file} ${problem}`);
  return text;
}
