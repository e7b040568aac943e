import { PassThrough } from 'node:stream';
import { runCli } from '../../src/cli/program.ts';

export interface CliResult {
  code: number | null;
  out: string;
  err: string;
  /** stdout parsed as JSON, when it is JSON. */
  json: any;
}

/** Runs the mailgate CLI in-process with its own stdout/stderr and environment. */
export async function runCliCaptured(env: NodeJS.ProcessEnv, argv: string[]): Promise<CliResult> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c) => (out += c));
  stderr.on('data', (c) => (err += c));
  const code = await runCli(argv, { stdout, stderr, env });
  let json: any;
  try {
    json = JSON.parse(out);
  } catch {
    json = undefined;
  }
  return { code, out, err, json };
}
