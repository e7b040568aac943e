// A counting SMTP sink in its own process (so neither side of a benchmark shares its CPU).
// Prints "port N" on start; answers "count" messages from the parent with the total received.
import { SMTPServer } from 'smtp-server';

let received = 0;
const server = new SMTPServer({
  disabledCommands: ['STARTTLS'],
  authOptional: true,
  logger: false,
  onAuth: (_auth, _session, cb) => cb(null, { user: 'bench' }),
  onData(stream, _session, cb) {
    stream.on('data', () => {});
    stream.on('end', () => {
      received++;
      cb();
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
