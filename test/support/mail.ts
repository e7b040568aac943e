// Test mail: a delivery-status report (RFC 3464) as a mail system sends one, returning the
// headers of the original.

/** A DSN for `recipient`, sent to `to`, naming the original's Message-ID in its returned headers. */
export function dsn(h: { to: string; messageId: string; original: string; recipient: string; status: string; diagnostic: string }): string {
  return [
    'From: Mail Delivery System <MAILER-DAEMON@mx.lead.example>',
    `To: ${h.to}`,
    'Subject: Undelivered Mail Returned to Sender',
    `Date: ${new Date().toUTCString()}`,
    `Message-ID: ${h.messageId}`,
    'Auto-Submitted: auto-replied',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="b1"',
    '',
    '--b1',
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'This is the mail system at host mx.lead.example. Your message could not be delivered.',
    '',
    '--b1',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.lead.example',
    '',
    `Final-Recipient: rfc822; ${h.recipient}`,
    `Original-Recipient: rfc822; ${h.recipient}`,
    'Action: failed',
    `Status: ${h.status}`,
    `Diagnostic-Code: smtp; ${h.diagnostic}`,
    '',
    '--b1',
    'Content-Type: text/rfc822-headers',
    '',
    `From: Alice <${h.to}>`,
    `To: ${h.recipient}`,
    'Subject: Hello',
    `Message-ID: ${h.original}`,
    '',
    '--b1--',
    '',
  ].join('\r\n');
}
