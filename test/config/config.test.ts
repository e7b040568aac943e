import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, ConfigError, publicUrl, publicUrlWarning } from '../../src/config/index.ts';
import { parseDuration } from '../../src/shared/duration.ts';

describe('configuration', () => {
  function dir(files: Record<string, unknown>): string {
    const d = mkdtempSync(path.join(os.tmpdir(), 'mailgate-config-'));
    for (const [name, content] of Object.entries(files)) writeFileSync(path.join(d, name), typeof content === 'string' ? content : JSON.stringify(content));
    return d;
  }

  it('defaults, then config/default.json, then config/$NODE_ENV.json, then env', () => {
    const d = dir({ 'default.json': { port: 9000, host: '0.0.0.0', shutdownTimeout: '10s' }, 'staging.json': { port: 9100 } });
    assert.equal(loadConfig({}, {}, d).port, 9000);
    assert.equal(loadConfig({}, {}, d).logLevel, 'info');
    assert.equal(loadConfig({}, {}, d).shutdownTimeout, 10_000);
    assert.equal(loadConfig({ NODE_ENV: 'staging' }, {}, d).port, 9100);
    assert.equal(loadConfig({ NODE_ENV: 'staging', PORT: '9200' }, {}, d).port, 9200);
    assert.equal(loadConfig({ MAILGATE_SHUTDOWN_TIMEOUT: '2m' }, {}, d).shutdownTimeout, 120_000);
    assert.equal(loadConfig({}, {}, d).databaseUrl, undefined);
    assert.ok(path.isAbsolute(loadConfig({}, {}, d).dataDir));
  });

  it('the shipped config/default.json is valid and complete', () => {
    const c = loadConfig({});
    assert.equal(c.port, 8080);
    assert.equal(c.host, '127.0.0.1');
  });

  it('a bad value names the setting and where it came from', () => {
    const d = dir({ 'default.json': { port: 'abc' } });
    assert.throws(() => loadConfig({}, {}, d), (e: Error) => e instanceof ConfigError && /invalid setting port in config\/ \(port\)/.test(e.message));
    assert.throws(() => loadConfig({ PORT: '70000' }, {}), /invalid setting PORT \(port\)/);
    assert.throws(() => loadConfig({ MAILGATE_SECRET_KEY: 'abc' }, {}), /invalid setting MAILGATE_SECRET_KEY/);
    assert.throws(() => loadConfig({ DATABASE_URL: 'mysql://h/db' }, {}), /invalid setting DATABASE_URL.*postgres/);
    assert.throws(() => loadConfig({ MAILGATE_SHUTDOWN_TIMEOUT: 'soon' }, {}), /invalid setting MAILGATE_SHUTDOWN_TIMEOUT.*duration/);
    // A session's end past what a timestamp holds made every sign-in fail; a year is the most.
    assert.throws(() => loadConfig({ MAILGATE_DASHBOARD_SESSION_IDLE: '367d' }, {}), /invalid setting MAILGATE_DASHBOARD_SESSION_IDLE.*at most 366d/);
    assert.throws(() => loadConfig({ MAILGATE_DASHBOARD_SESSION_IDLE: '99999999d' }, {}), /invalid setting MAILGATE_DASHBOARD_SESSION_IDLE.*longer than 3650d/);
    assert.equal(loadConfig({ MAILGATE_DASHBOARD_SESSION_IDLE: '366d' }, {}).dashboardSessionIdle, 366 * 86_400_000);
  });

  it('a worker is dead after at least two of its heartbeats', () => {
    const c = loadConfig({});
    assert.equal(c.workerHeartbeat, 5_000);
    assert.equal(c.workerDeadAfter, 15_000);
    assert.equal(loadConfig({ MAILGATE_WORKER_HEARTBEAT: '1s', MAILGATE_WORKER_DEAD_AFTER: '2s' }).workerDeadAfter, 2_000);
    assert.throws(() => loadConfig({ MAILGATE_WORKER_HEARTBEAT: '10s' }), /invalid setting MAILGATE_WORKER_DEAD_AFTER.*twice MAILGATE_WORKER_HEARTBEAT/);
    assert.throws(() => loadConfig({ MAILGATE_WORKER_DEAD_AFTER: '500ms' }), /invalid setting MAILGATE_WORKER_DEAD_AFTER.*at least 1s/);
  });

  it('the inbound size limit: bytes, KB or MB, from 64KB to 256MB', () => {
    assert.equal(loadConfig({}).inboundMaxBytes, 2 * 1024 * 1024);
    assert.equal(loadConfig({ MAILGATE_INBOUND_MAX_BYTES: '512KB' }).inboundMaxBytes, 512 * 1024);
    assert.equal(loadConfig({ MAILGATE_INBOUND_MAX_BYTES: '10mb' }).inboundMaxBytes, 10 * 1024 * 1024);
    assert.equal(loadConfig({ MAILGATE_INBOUND_MAX_BYTES: '100000' }).inboundMaxBytes, 100_000);
    assert.equal(loadConfig({}, { inboundMaxBytes: 65_536 }).inboundMaxBytes, 65_536);
    assert.throws(() => loadConfig({ MAILGATE_INBOUND_MAX_BYTES: '2 gigabytes' }), /invalid setting MAILGATE_INBOUND_MAX_BYTES.*a number of bytes, or one with KB or MB/);
    assert.throws(() => loadConfig({ MAILGATE_INBOUND_MAX_BYTES: '1KB' }), /invalid setting MAILGATE_INBOUND_MAX_BYTES.*at least 64KB/);
    assert.throws(() => loadConfig({ MAILGATE_INBOUND_MAX_BYTES: '257MB' }), /invalid setting MAILGATE_INBOUND_MAX_BYTES.*at most 256MB/);
  });

  it('a duration waited with a timer is at most 24d; the webhook timeout at most 10m', () => {
    // Node fires a timer over 2^31-1 ms after 1 ms: a 30d webhook timeout timed out every attempt at once.
    for (const env of ['MAILGATE_IMAP_POLL_INTERVAL', 'MAILGATE_IMAP_TIMEOUT', 'MAILGATE_SEND_LEASE', 'MAILGATE_SHUTDOWN_TIMEOUT', 'MAILGATE_LLM_TIMEOUT', 'MAILGATE_WORKER_DEAD_AFTER']) {
      assert.throws(() => loadConfig({ [env]: '25d' }), new RegExp(`invalid setting ${env}.*at most 24d`), env);
      assert.doesNotThrow(() => loadConfig({ [env]: '24d' }), env);
    }
    assert.throws(() => loadConfig({ MAILGATE_WEBHOOK_TIMEOUT: '30d' }), /invalid setting MAILGATE_WEBHOOK_TIMEOUT.*at most 10m/);
    assert.throws(() => loadConfig({ MAILGATE_WEBHOOK_TIMEOUT: '11m' }), /invalid setting MAILGATE_WEBHOOK_TIMEOUT.*at most 10m/);
    assert.equal(loadConfig({ MAILGATE_WEBHOOK_TIMEOUT: '10m' }).webhookTimeout, 600_000);
  });

  it('the HTTP keep-alive timeout: 65s by default, at least 1s, at most 24d', () => {
    assert.equal(loadConfig({}).httpKeepAliveTimeout, 65_000);
    assert.equal(loadConfig({ MAILGATE_HTTP_KEEPALIVE_TIMEOUT: '120s' }).httpKeepAliveTimeout, 120_000);
    assert.throws(() => loadConfig({ MAILGATE_HTTP_KEEPALIVE_TIMEOUT: '500ms' }), /invalid setting MAILGATE_HTTP_KEEPALIVE_TIMEOUT.*at least 1s/);
    assert.throws(() => loadConfig({ MAILGATE_HTTP_KEEPALIVE_TIMEOUT: '25d' }), /invalid setting MAILGATE_HTTP_KEEPALIVE_TIMEOUT.*at most 24d/);
  });

  it('the IMAP answer timeout: 30s by default, at least 1s', () => {
    assert.equal(loadConfig({}).imapTimeout, 30_000);
    assert.equal(loadConfig({ MAILGATE_IMAP_TIMEOUT: '45s' }).imapTimeout, 45_000);
    assert.throws(() => loadConfig({ MAILGATE_IMAP_TIMEOUT: '500ms' }), /invalid setting MAILGATE_IMAP_TIMEOUT.*at least 1s/);
  });

  it('unknown keys and broken JSON in config/ stop start-up', () => {
    assert.throws(() => loadConfig({}, {}, dir({ 'default.json': { prot: 1 } })), /unknown setting in config\/: prot/);
    assert.throws(() => loadConfig({}, {}, dir({ 'default.json': '{"port": ' })), /not valid JSON/);
  });

  it('accepts a 32-byte secret key in hex or base64 only', () => {
    const hex = 'a'.repeat(64);
    assert.equal(loadConfig({ MAILGATE_SECRET_KEY: hex }).secretKey, hex);
    const b64 = Buffer.alloc(32, 7).toString('base64');
    assert.equal(loadConfig({ MAILGATE_SECRET_KEY: b64 }).secretKey, b64);
    assert.throws(() => loadConfig({ MAILGATE_SECRET_KEY: Buffer.alloc(16).toString('base64') }), /MAILGATE_SECRET_KEY/);
  });

  it('durations', () => {
    assert.equal(parseDuration('250ms'), 250);
    assert.equal(parseDuration('30s'), 30_000);
    assert.equal(parseDuration('5m'), 300_000);
    assert.equal(parseDuration('2h'), 7_200_000);
    assert.equal(parseDuration('1d'), 86_400_000);
    assert.equal(parseDuration('1.5h'), 5_400_000);
    assert.throws(() => parseDuration('5 minutes'));
    assert.throws(() => parseDuration('-1s'));
    // Zero needs no unit: the settings that take 0 say "0 keeps everything".
    assert.equal(parseDuration('0'), 0);
    assert.throws(() => parseDuration('30'), /not a duration/);
    // A setting's duration is at most ten years: a time that far from now is still a date.
    assert.equal(loadConfig({ MAILGATE_EVENT_RETENTION: '3650d' }, {}).eventRetention, 3650 * 86_400_000);
    assert.throws(() => loadConfig({ MAILGATE_EVENT_RETENTION: '3651d' }, {}), /MAILGATE_EVENT_RETENTION.*longer than 3650d/);
    assert.throws(() => loadConfig({ MAILGATE_WEBHOOK_RETRY_DELAYS: '30s,100000000d' }, {}), /MAILGATE_WEBHOOK_RETRY_DELAYS.*longer than 3650d/);
    assert.throws(() => loadConfig({ MAILGATE_SMTP_RETRY_DELAYS: '99999999999h' }, {}), /MAILGATE_SMTP_RETRY_DELAYS.*longer than 3650d/);
    assert.equal(loadConfig({ MAILGATE_EVENT_RETENTION: '0' }, {}).eventRetention, 0);
    assert.throws(() => loadConfig({ MAILGATE_DASHBOARD_SESSION_IDLE: '0' }, {}), /MAILGATE_DASHBOARD_SESSION_IDLE.*at least 1m/);
  });

  it("the links' base: MAILGATE_PUBLIC_URL, else the listen address (loopback for a wildcard, brackets for IPv6); unset beyond loopback is warned about", () => {
    const at = (env: Record<string, string>) => loadConfig(env, {});
    assert.equal(publicUrl(at({ MAILGATE_PUBLIC_URL: 'https://mg.example.com/' })), 'https://mg.example.com');
    assert.equal(publicUrl(at({ PORT: '8080' })), 'http://127.0.0.1:8080');
    assert.equal(publicUrl(at({ HOST: '0.0.0.0', PORT: '8080' })), 'http://127.0.0.1:8080');
    assert.equal(publicUrl(at({ HOST: '::', PORT: '8080' })), 'http://127.0.0.1:8080');
    assert.equal(publicUrl(at({ HOST: 'fd00::5', PORT: '8080' })), 'http://[fd00::5]:8080');
    assert.equal(publicUrlWarning(at({})), null);
    assert.equal(publicUrlWarning(at({ HOST: '::1' })), null);
    assert.equal(publicUrlWarning(at({ HOST: '0.0.0.0', MAILGATE_PUBLIC_URL: 'https://mg.example.com' })), null);
    assert.match(publicUrlWarning(at({ HOST: '0.0.0.0', PORT: '8080' }))!, /MAILGATE_PUBLIC_URL is unset: .* point at http:\/\/127\.0\.0\.1:8080/);
    assert.match(publicUrlWarning(at({ HOST: '10.0.0.7' }))!, /MAILGATE_PUBLIC_URL is unset/);
  });

  it('a refused secret is never repeated: a URL shows no password or query, a key only its length', () => {
    const refusal = (env: Record<string, string>) => {
      try {
        loadConfig(env, {});
      } catch (err) {
        return (err as Error).message;
      }
      assert.fail(`${JSON.stringify(env)} was taken`);
    };
    const key = 'a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b'; // 63 hex digits: one short
    let message = refusal({ MAILGATE_SECRET_KEY: key });
    assert.match(message, /invalid setting MAILGATE_SECRET_KEY \(secretKey\): .*\(got 63 characters; the value is not shown: it is a secret\)/);
    assert.ok(!message.includes(key.slice(0, 16)), message);
    message = refusal({ DATABASE_URL: 'postgress://mailgate:S3cretPw@db.internal:5432/mailgate?sslpassword=TlsPw' });
    assert.match(message, /invalid setting DATABASE_URL \(databaseUrl\): .*\(got "postgress:\/\/mailgate:\*\*\*@db\.internal:5432\/mailgate\?\.\.\."\)/);
    assert.ok(!/S3cretPw|TlsPw/.test(message), message);
    message = refusal({ MAILGATE_LLM_BASE_URL: 'ftp://user:LlmPw@llm.example/v1' });
    assert.ok(!message.includes('LlmPw'), message);
    message = refusal({ DATABASE_URL: 'mailgate:S3cretPw@db.internal/mailgate' });
    assert.match(message, /\(got 38 characters; the value is not shown: it is a secret\)/);
    assert.ok(!message.includes('S3cretPw'), message);
  });

  it('a refused setting says once what it got', () => {
    for (const env of [{ LOG_LEVEL: 'verbose' }, { MAILGATE_WEBHOOK_ALLOW_PRIVATE: 'yes' }, { MAILGATE_EVENT_RETENTION: '5m' }]) {
      let message = '';
      try {
        loadConfig(env, {});
      } catch (err) {
        message = (err as Error).message;
      }
      assert.equal(message.split('(got ').length, 2, message);
    }
  });
});
