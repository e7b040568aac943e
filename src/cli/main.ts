import { runCli } from './program.ts';

const code = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });
if (code !== null) {
  process.exitCode = code;
}
