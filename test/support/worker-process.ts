import { spawn, type ChildProcess } from 'node:child_process';

export interface WorkerProcess {
  proc: ChildProcess;
  pid: number;
  output(): string;
  /** Sends `signal` and resolves when the process has exited. */
  kill(signal: NodeJS.Signals): Promise<void>;
}

/** `mailgate serve --role worker` as a real process, resolved once it logs that it is up. */
export async function startWorkerProcess(env: NodeJS.ProcessEnv): Promise<WorkerProcess> {
  const proc = spawn('node', ['bin/mailgate.js', 'serve', '--role', 'worker'], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (c) => (out += c));
  proc.stderr!.on('data', (c) => (out += c));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker did not start:\n${out}`)), 60_000);
    const up = () => {
      if (!out.includes('"msg":"mailgate is up"')) return;
      clearTimeout(timer);
      proc.stdout!.off('data', up);
      proc.off('exit', exited);
      resolve();
    };
    const exited = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`worker exited with ${code}:\n${out}`));
    };
    proc.stdout!.on('data', up);
    proc.once('exit', exited);
  });
  return {
    proc,
    pid: proc.pid!,
    output: () => out,
    kill: (signal) =>
      new Promise((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill(signal);
      }),
  };
}
