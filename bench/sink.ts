// A counting SMTP sink in its own process (so neither side of a benchmark shares its CPU).
// Prints "port N" on start; answers "count" messages from the parent with the total received.
// BENCH_SINK_ANSWER_MS=N (or N-M, uniformly between N and M per message): each message's end
// of data is answered that many ms late, as a real server answers after its checks (tens to
// hundreds of ms), where the local sink answers at once.
import { SMTPServer } from 'smtp-server';

const [ANSWER_MIN, ANSWER_MAX] = (() => {
  const [a, b] = (process.env.BENCH_SINK_ANSWER_MS ?? '0').split('-').map(Number);
  return [a, b ?? a];
})();
let received = 0;
const server = new SMTPServer({
  disabledCommands: ['STARTTLS'],
  authOptional: true,
  logger: false,
  onAuth: (_auth, _session, cb) => cb(null, { user: 'bench' }),
  onData(stream, _session, cb) {
    stream.on('data', () => {});
    stream.on('end', () => {
      const answer = () => {
        received++;
        cb();
      };
      const ms = ANSWER_MIN + Math.random() * (ANSWER_MAX - ANSWER_MIN);
      if (ms > 0) setTimeout(answer, ms);
      else answer();
    });
  },
});
server.listen(0, '127.0.0.1', () => {
  process.send!({ port: (server.server.address() as { port: number }).port });
});
process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'count') process.send!({ count: received });
  if (m.cmd === 'reset') {
    received = 0;
    process.send!({ count: 0 });
  }
  if (m.cmd === 'exit') server.close(() => process.exit(0));
});
