// The HELD-OUT bounce families: written first, from public descriptions of each format, before
// bounces.ts was changed for this corpus, and never used to tune it (docs/classification.md).
// Two reports per family; the tuned families live in tuned.ts.
import { attachedOriginal, boundary, dsnFields, originalHeaders, originalMessage, smtpLine, type Case, type Diag, type Sample } from './common.ts';
import { encodedWord, leaf, message, multipart, multipartType, pick, type Transfer } from './mime.ts';

export interface Family {
  name: string;
  domain: string;
  diags: Diag[];
  make: (c: Case) => Sample;
}

const D = (code: string | null, status: string | null, text: string, type: 'hard' | 'soft'): Diag => ({ code, status, text, type });
const UNKNOWN = D('550', '5.1.1', 'Recipient address rejected: User unknown in virtual mailbox table', 'hard');
const NOUSER = D('550', null, 'No such user here', 'hard');
const FULL = D('452', '4.2.2', 'Mailbox full, try again later', 'soft');
const FULL_PLAIN = D(null, null, 'mailbox is full: retry later', 'soft');
const DISABLED = D('550', '5.2.1', 'This mailbox has been disabled', 'hard');
const GREY = D('450', '4.7.1', 'Greylisted, please try again in 300 seconds', 'soft');
const POLICY = D('554', '5.7.1', 'Message rejected due to local policy', 'hard');
const RATE = D('421', '4.7.0', 'Too many messages from your IP, try again later', 'soft');
const NODOMAIN = D(null, null, 'Host or domain name not found. Name service error', 'hard');

const tx = (c: Case, xs: Transfer[]) => pick(c.r, xs);
const auto = 'Auto-Submitted: auto-replied';

export function head(c: Case, from: string, subject: string, ct: string, extra: string[] = []): string[] {
  return [
    'Return-Path: <>',
    `Received: from ${c.mx} (${c.mx} [${c.ip}]) by mail.${c.senderDomain} with ESMTP; ${c.date}`,
    `From: ${from}`,
    `To: ${c.sender}`,
    `Subject: ${subject}`,
    `Date: ${c.date}`,
    `Message-ID: <${c.n}.${c.origId.slice(5, 17)}@${c.mx}>`,
    'MIME-Version: 1.0',
    ...extra,
    `Content-Type: ${ct}`,
  ];
}

export function report(c: Case, from: string, subject: string, human: string, reportingMta: string, opts: { headersOnly?: boolean; charset?: string; extra?: string[]; noDsn?: boolean } = {}): Sample {
  const b = boundary(c, 'H');
  const parts = [leaf({ type: 'text/plain', charset: opts.charset ?? 'us-ascii', transfer: tx(c, ['7bit', 'quoted-printable']), body: human })];
  if (!opts.noDsn) parts.push(leaf({ type: 'message/delivery-status', body: dsnFields(c, reportingMta) }));
  parts.push(attachedOriginal(c, opts.headersOnly ?? false));
  const ct = opts.noDsn ? multipartType('mixed', b) : multipartType('report', b, 'report-type=delivery-status');
  return { raw: message(head(c, from, subject, ct, opts.extra ?? [auto]), multipart(b, parts, 'This is a MIME-encapsulated message.'), c.eol), carriesMessageId: true };
}

export function plain(c: Case, from: string, subject: string, body: string, opts: { charset?: string; transfer?: Transfer; extra?: string[] } = {}): Sample {
  const cs = opts.charset ?? 'us-ascii';
  const t = opts.transfer ?? '7bit';
  const headers = head(c, from, subject, `text/plain; charset="${cs}"`, opts.extra ?? []);
  headers.push(`Content-Transfer-Encoding: ${t}`);
  const enc = leaf({ type: 'text/plain', charset: cs, transfer: t, body }).split('\n\n').slice(1).join('\n\n');
  return { raw: message(headers, enc, c.eol), carriesMessageId: /message-id:/i.test(body) };
}

const eximBody = (c: Case, detail: string) =>
  `This message was created automatically by mail delivery software.\n\nA message that you sent could not be delivered to one or more of its\nrecipients. This is a permanent error. The following address(es) failed:\n\n  ${c.rcpt}\n${detail}\n\n------ This is a copy of the message, including all the headers. ------\n\n${originalMessage(c)}`;

export const HOLDOUT: Family[] = [
  {
    name: 'exim',
    domain: 'hosting-eu.example',
    diags: [UNKNOWN, POLICY],
    make: (c) => plain(c, `Mail Delivery System <Mailer-Daemon@${c.mx}>`, 'Mail delivery failed: returning message to sender', eximBody(c, `    host ${c.mx} [${c.ip}]\n    SMTP error from remote mail server after RCPT TO:<${c.rcpt}>:\n    ${smtpLine(c.diag)}`), { extra: [`X-Failed-Recipients: ${c.rcpt}`, auto] }),
  },
  {
    name: 'exim-retry-timeout',
    domain: 'slowhost.example',
    diags: [D(null, null, 'retry timeout exceeded', 'soft'), D(null, null, 'retry time not reached for any host after a long failure period', 'soft')],
    make: (c) => plain(c, `Mail Delivery System <Mailer-Daemon@smtp.${c.senderDomain}>`, 'Mail delivery failed: returning message to sender', eximBody(c, `    ${c.diag.text}`), { extra: [`X-Failed-Recipients: ${c.rcpt}`, auto] }),
  },
  {
    name: 'exim-frozen',
    domain: 'frozen-dest.example',
    diags: [D(null, null, 'message has been frozen', 'soft'), D(null, null, 'message has been frozen', 'soft')],
    make: (c) =>
      plain(
        c,
        `Mail Delivery System <Mailer-Daemon@smtp.${c.senderDomain}>`,
        'Mail delivery failed: returning message to sender',
        `This message was created automatically by mail delivery software.\n\nA message that you sent has not yet been delivered to one or more of its\nrecipients after more than 24 hours on the queue on smtp.${c.senderDomain}.\n\nThe message has been frozen and will not be retried; delivery to the\nfollowing address(es) has been abandoned:\n\n  ${c.rcpt}\n    Message ${c.origId.slice(5, 11)}-000${c.n}-Ab has been frozen\n\n------ This is a copy of the message's headers. ------\n\n${originalHeaders(c)}\n`,
        { extra: [auto] },
      ),
  },
  {
    name: 'postfix',
    domain: 'mailhost.example',
    diags: [UNKNOWN, FULL],
    make: (c) =>
      report(
        c,
        `MAILER-DAEMON@mail.${c.senderDomain} (Mail Delivery System)`,
        'Undelivered Mail Returned to Sender',
        `This is the mail system at host mail.${c.senderDomain}.\n\nI'm sorry to have to inform you that your message could not\nbe delivered to one or more recipients. It's attached below.\n\nFor further assistance, please send mail to postmaster.\n\nIf you do so, please include this problem report. You can\ndelete your own text from the attached returned message.\n\n                   The mail system\n\n<${c.rcpt}>: host ${c.mx}[${c.ip}] said: ${smtpLine(c.diag)} (in reply to RCPT TO\n    command)\n`,
        `mail.${c.senderDomain}`,
        { headersOnly: c.n % 2 === 0, extra: [] },
      ),
  },
  {
    name: 'postfix-no-dsn',
    domain: 'legacy-mx.example',
    diags: [NOUSER, NODOMAIN],
    make: (c) =>
      report(
        c,
        `Mail Delivery System <MAILER-DAEMON@mail.${c.senderDomain}>`,
        'Undelivered Mail Returned to Sender',
        `This is the mail system at host mail.${c.senderDomain}.\n\nI'm sorry to have to inform you that your message could not\nbe delivered to one or more recipients.\n\n                   The mail system\n\n<${c.rcpt}>: ${c.diag.code ? `host ${c.mx}[${c.ip}] said: ${smtpLine(c.diag)} (in reply to RCPT TO command)` : `${c.diag.text} for name=${c.rcptDomain} type=MX: Host not found`}\n`,
        '',
        { noDsn: true, extra: [] },
      ),
  },
  {
    name: 'sendmail-new',
    domain: 'unix-shop.example',
    diags: [UNKNOWN, D('552', '5.2.2', 'Mailbox over quota', 'hard')],
    make: (c) =>
      report(
        c,
        `Mail Delivery Subsystem <MAILER-DAEMON@mail.${c.senderDomain}>`,
        'Returned mail: see transcript for details',
        `The original message was received at ${c.origDate}\nfrom mail.${c.senderDomain} [198.51.100.20]\n\n   ----- The following addresses had permanent fatal errors -----\n<${c.rcpt}>\n    (reason: ${smtpLine(c.diag)})\n\n   ----- Transcript of session follows -----\n... while talking to ${c.mx}.:\n>>> RCPT To:<${c.rcpt}>\n<<< ${smtpLine(c.diag)}\n${c.diag.code} ${c.diag.status} <${c.rcpt}>... ${c.diag.text}\n`,
        `mail.${c.senderDomain}`,
        { extra: [auto] },
      ),
  },
  {
    name: 'sendmail-old',
    domain: 'oldunix.example',
    diags: [D('550', null, 'User unknown', 'hard'), D(null, null, 'Host unknown (Name server: host not found)', 'hard')],
    make: (c) =>
      plain(
        c,
        `Mail Delivery Subsystem <MAILER-DAEMON@mail.${c.senderDomain}>`,
        `Returned mail: ${c.diag.text.split(' (')[0]}`,
        `The original message was received at ${c.origDate}\nfrom localhost [127.0.0.1]\n\n   ----- Transcript of session follows -----\n${c.diag.code ? `${c.diag.code} ` : '550 '}${c.rcpt}... ${c.diag.text}\n\n   ----- Unsent message follows -----\n${originalMessage(c)}`,
      ),
  },
  {
    name: 'qmail',
    domain: 'qmail-host.example',
    diags: [NOUSER, D(null, '5.1.1', 'Sorry, no mailbox here by that name.', 'hard')],
    make: (c) =>
      plain(
        c,
        `MAILER-DAEMON@${c.mx}`,
        'failure notice',
        `Hi. This is the qmail-send program at ${c.mx}.\nI'm afraid I wasn't able to deliver your message to the following addresses.\nThis is a permanent error; I've given up. Sorry it didn't work out.\n\n<${c.rcpt}>:\n${c.diag.status ? `${c.diag.text} (#${c.diag.status})` : `Remote host said: ${smtpLine(c.diag)}`}\n\n--- Below this line is a copy of the message.\n\n${originalMessage(c)}`,
      ),
  },
  {
    name: 'qmail-fork',
    domain: 'notqmail-site.example',
    diags: [D(null, '5.2.2', 'The users mailfolder is over the allowed quota (size).', 'hard'), D('451', null, 'Connection timed out', 'soft')],
    make: (c) =>
      plain(
        c,
        `MAILER-DAEMON@mx.${c.senderDomain}`,
        'failure notice',
        `Hi. This is the qmail-send program at mx.${c.senderDomain}.\nI'm afraid I wasn't able to deliver your message to the following addresses.\nThis is a permanent error; I've given up. Sorry it didn't work out.\n\n<${c.rcpt}>:\n${c.diag.status ? `${c.diag.text} (#${c.diag.status})` : `${c.ip} does not like recipient.\nRemote host said: ${smtpLine(c.diag)}\nGiving up on ${c.ip}.`}\n\n--- Enclosed are the original headers of the message.\n\n${originalHeaders(c)}\n`,
      ),
  },
  {
    name: 'courier',
    domain: 'courier-mx.example',
    diags: [UNKNOWN, DISABLED],
    make: (c) =>
      report(
        c,
        `Courier mail server at mail.${c.senderDomain} <@>`,
        'NOTICE: mail delivery status.',
        `This is a delivery status notification from mail.${c.senderDomain},\nrunning the Courier mail server, version 1.1.\n\nThe original message was received on ${c.origDate}\nfrom [198.51.100.20]\n\n---------------------------------------------------------------------------\n\n                           UNDELIVERABLE MAIL\n\nYour message to the following recipients cannot be delivered:\n\n<${c.rcpt}>:\n    ${c.mx} [${c.ip}]:\n>>> RCPT TO:<${c.rcpt}>\n<<< ${smtpLine(c.diag)}\n\n---------------------------------------------------------------------------\n`,
        `mail.${c.senderDomain}`,
      ),
  },
  {
    name: 'opensmtpd',
    domain: 'openbsd-box.example',
    diags: [UNKNOWN, D('421', null, 'Service not available, closing transmission channel', 'soft')],
    make: (c) => {
      const b = boundary(c, 'O');
      const body = `Hi!\n\nThis is the MAILER-DAEMON, please DO NOT REPLY to this email.\n\nAn error has occurred while attempting to deliver a message for\nthe following list of recipients:\n\n${c.rcpt}: ${smtpLine(c.diag)}\n\nBelow is a copy of the original message:\n\n${originalMessage(c)}`;
      return { raw: message(head(c, `Mailer Daemon <MAILER-DAEMON@mail.${c.senderDomain}>`, 'Delivery status notification: error', multipartType('mixed', b), [auto]), multipart(b, [leaf({ type: 'text/plain', charset: 'us-ascii', body })]), c.eol), carriesMessageId: true };
    },
  },
  {
    name: 'apache-james',
    domain: 'james-server.example',
    diags: [UNKNOWN, D(null, null, 'Too many retries failure. Giving up. Connection refused', 'soft')],
    make: (c) =>
      report(
        c,
        `postmaster@mail.${c.senderDomain}`,
        `[BOUNCE] ${c.origSubject}`,
        `Hi. This is the James mail server at mail.${c.senderDomain}.\nI'm afraid I wasn't able to deliver your message to the following addresses.\nThis is a permanent error; I've given up. Sorry it didn't work out.  Below\nI include the list of recipients and the reason why I was unable to deliver\nyour message.\n\nFailed recipient(s):\n${c.rcpt}\n\nError message:\n${smtpLine(c.diag)}\n`,
        `mail.${c.senderDomain}`,
        { extra: [] },
      ),
  },
  {
    name: 'exchange-2003',
    domain: 'corp-legacy.example',
    diags: [UNKNOWN, D('552', '5.2.2', 'Mailbox full', 'hard')],
    make: (c) =>
      report(
        c,
        `System Administrator <postmaster@${c.rcptDomain}>`,
        `Undeliverable: ${c.origSubject}`,
        `Your message did not reach some or all of the intended recipients.\n\n      Subject:\t${c.origSubject}\n      Sent:\t${c.origDate}\n\nThe following recipient(s) cannot be reached:\n\n      ${c.rcpt} on ${c.date}\n            There was a SMTP communication problem with the recipient's email server.  Please contact your system administrator.\n            <${c.mx} #${c.diag.status} smtp;${c.diag.code} ${c.diag.status} ${c.diag.text}>\n`,
        `${c.mx}`,
        { headersOnly: true },
      ),
  },
  {
    name: 'exchange-2010',
    domain: 'exchange-onprem.example',
    diags: [D('550', '5.1.1', 'RESOLVER.ADR.RecipNotFound; not found', 'hard'), D('554', '5.2.2', 'mailbox full; STOREDRV.Deliver.Exception:QuotaExceededException', 'hard')],
    make: (c) =>
      report(
        c,
        `Microsoft Exchange <postmaster@${c.rcptDomain}>`,
        `Undeliverable: ${c.origSubject}`,
        `Delivery has failed to these recipients or groups:\n\n${c.rcpt}\nThe e-mail address you entered couldn't be found. Please check the recipient's e-mail address and try to resend the message.\n\n\n\nDiagnostic information for administrators:\n\nGenerating server: EXCH01.${c.rcptDomain}\n\n${c.rcpt}\n#${smtpLine(c.diag)} ##\n\nOriginal message headers:\n\n${originalHeaders(c)}\n`,
        `EXCH01.${c.rcptDomain}`,
        { extra: [auto, 'X-MS-Exchange-Message-Is-Ndr:', `In-Reply-To: ${c.origId}`] },
      ),
  },
  {
    name: 'office365',
    domain: 'tenant365.example',
    diags: [D('550', '5.1.10', 'RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup', 'hard'), D('550', '5.4.1', 'Recipient address rejected: Access denied. AS(201806281)', 'hard')],
    make: (c) => {
      const b = boundary(c, 'X');
      const a = boundary(c, 'A');
      const text = `Your message to ${c.rcpt} couldn't be delivered.\n\n${c.rcptLocal} wasn't found at ${c.rcptDomain}.\n\n${c.sender.split('@')[0]}     Office 365     ${c.rcptLocal}\nAction Required                 Recipient\n\nUnknown To address\n\nHow to Fix It\nThe address may be misspelled or may not exist.\n\nMore Info for Email Admins\nStatus code: ${c.diag.status}\n\nOriginal Message Details\nCreated Date: ${c.origDate}\nSender Address: ${c.sender}\nRecipient Address: ${c.rcpt}\nSubject: ${c.origSubject}\n\nError Details\nReported error: ${smtpLine(c.diag)}\nDSN generated by: AM0PR07MB${1000 + c.n}.eurprd07.prod.outlook.com\n`;
      const alt = `Content-Type: ${multipartType('alternative', a)}\n\n${multipart(a, [leaf({ type: 'text/plain', charset: 'utf-8', transfer: 'quoted-printable', body: text }), leaf({ type: 'text/html', charset: 'utf-8', transfer: 'quoted-printable', body: `<html><body><p>${text.replace(/\n/g, '<br>\n')}</p></body></html>` })])}`;
      const parts = [alt, leaf({ type: 'message/delivery-status', body: dsnFields(c, `AM0PR07MB${1000 + c.n}.eurprd07.prod.outlook.com`) }), attachedOriginal(c, true)];
      return { raw: message(head(c, `Microsoft Outlook <postmaster@${c.rcptDomain}>`, `Undeliverable: ${c.origSubject}`, multipartType('report', b, 'report-type=delivery-status'), [auto, `In-Reply-To: ${c.origId}`, `References: ${c.origId}`]), multipart(b, parts), c.eol), carriesMessageId: true };
    },
  },
  {
    name: 'outlook-com',
    domain: 'hotmail.example',
    diags: [D('550', '5.5.0', 'Requested action not taken: mailbox unavailable (S2017062302)', 'hard'), D('451', '4.7.500', 'Server busy. Please try again later from [198.51.100.20]. (AS843)', 'soft')],
    make: (c) =>
      plain(
        c,
        `postmaster@outlook.com`,
        `Undeliverable: ${c.origSubject}`,
        `Delivery has failed to these recipients or groups:\n\n${c.rcpt} (${c.rcpt})\nYour message couldn't be delivered. The Domain Name System (DNS) reported that the recipient's domain does not exist.\n\nDiagnostic information for administrators:\n\nGenerating server: DB5EUR03HT${c.n}.mail.protection.outlook.com\n\n${c.rcpt}\nRemote Server returned '${smtpLine(c.diag)}'\n\nOriginal message headers:\n\n${originalHeaders(c)}\n`,
        { charset: 'utf-8', transfer: 'quoted-printable', extra: [auto, 'X-MS-Exchange-Message-Is-Ndr:'] },
      ),
  },
  {
    name: 'exchange-de',
    domain: 'firma-de.example',
    diags: [D('550', '5.1.1', 'RESOLVER.ADR.RecipNotFound; nicht gefunden', 'hard'), D('550', '5.2.2', 'Postfach voll', 'hard')],
    make: (c) =>
      plain(
        c,
        `Microsoft Outlook <MicrosoftExchange329e71ec88ae4615bbc36ab6ce41109e@${c.rcptDomain}>`,
        encodedWord(`Unzustellbar: ${c.origSubject}`, 'utf-8', 'Q'),
        `Die Zustellung an folgende Empfänger oder Gruppen ist fehlgeschlagen:\n\n${c.rcpt}\nDie eingegebene E-Mail-Adresse wurde nicht gefunden. Überprüfen Sie die E-Mail-Adresse des Empfängers, und senden Sie die Nachricht erneut.\n\nDiagnoseinformationen für Administratoren:\n\nGenerierender Server: EX02.${c.rcptDomain}\n\n${c.rcpt}\nRemote Server returned '${smtpLine(c.diag)}'\n\nUrsprüngliche Nachrichtenkopfzeilen:\n\n${originalHeaders(c)}\n`,
        { charset: 'utf-8', transfer: 'base64', extra: [auto] },
      ),
  },
  {
    name: 'exchange-fr',
    domain: 'societe-fr.example',
    diags: [D('550', '5.1.1', 'RESOLVER.ADR.RecipNotFound; introuvable', 'hard'), D('550', '5.7.1', 'RESOLVER.RST.AuthRequired; authentification requise', 'hard')],
    make: (c) =>
      plain(
        c,
        `Microsoft Outlook <postmaster@${c.rcptDomain}>`,
        encodedWord(`Non remis : ${c.origSubject}`, 'iso-8859-1', 'Q'),
        `La remise a échoué pour les destinataires ou groupes suivants :\n\n${c.rcpt}\nL'adresse de messagerie que vous avez entrée est introuvable.\n\nInformations de diagnostic pour les administrateurs :\n\nServeur de génération : EXFR01.${c.rcptDomain}\n\n${c.rcpt}\nRemote Server returned '${smtpLine(c.diag)}'\n\nEn-têtes de message d'origine :\n\n${originalHeaders(c)}\n`,
        { charset: 'iso-8859-1', transfer: 'quoted-printable', extra: [auto] },
      ),
  },
  {
    name: 'exchange-es',
    domain: 'empresa-es.example',
    diags: [D('550', '5.1.1', 'RESOLVER.ADR.RecipNotFound; no se encontró', 'hard'), D('452', '4.3.1', 'Insufficient system resources', 'soft')],
    make: (c) =>
      plain(
        c,
        `Microsoft Outlook <postmaster@${c.rcptDomain}>`,
        encodedWord(`No se puede entregar: ${c.origSubject}`, 'utf-8', 'B'),
        `Error en la entrega a estos destinatarios o grupos:\n\n${c.rcpt}\nNo se encontró la dirección de correo electrónico que especificó.\n\nInformación de diagnóstico para administradores:\n\nServidor de generación: EXES01.${c.rcptDomain}\n\n${c.rcpt}\nRemote Server returned '${smtpLine(c.diag)}'\n\nEncabezados del mensaje original:\n\n${originalHeaders(c)}\n`,
        { charset: 'utf-8', transfer: 'quoted-printable', extra: [auto] },
      ),
  },
  {
    name: 'exchange-ja',
    domain: 'kaisha-jp.example',
    diags: [D('550', '5.1.1', 'RESOLVER.ADR.RecipNotFound; not found', 'hard'), D('550', '5.1.1', 'User unknown', 'hard')],
    make: (c) =>
      plain(
        c,
        `Microsoft Outlook <postmaster@${c.rcptDomain}>`,
        encodedWord(`配信不能: ${c.origSubject}`, 'utf-8', 'B'),
        `次の受信者またはグループへの配信に失敗しました:\n\n${c.rcpt}\n入力した電子メール アドレスが見つかりませんでした。\n\n管理者向けの診断情報:\n\n生成サーバー: EXJP01.${c.rcptDomain}\n\n${c.rcpt}\nRemote Server returned '${smtpLine(c.diag)}'\n\n元のメッセージ ヘッダー:\n\n${originalHeaders(c)}\n`,
        { charset: 'utf-8', transfer: 'base64', extra: [auto] },
      ),
  },
  {
    name: 'amazon-ses',
    domain: 'ses-recipient.example',
    diags: [UNKNOWN, D('552', '5.2.2', 'Mailbox full', 'hard')],
    make: (c) =>
      report(c, 'MAILER-DAEMON@amazonses.com', 'Delivery Status Notification (Failure)', `An error occurred while trying to deliver the mail to the following recipients:\n${c.rcpt}\n`, 'a8-12.smtp-out.amazonses.com', { extra: [`X-Original-To: ${c.sender}`] }),
  },
  {
    name: 'amazon-workmail',
    domain: 'workmail-user.example',
    diags: [D('550', '5.1.1', 'Requested action not taken: mailbox unavailable', 'hard'), RATE],
    make: (c) =>
      report(c, `MAILER-DAEMON@us-west-2.awsapps.com`, 'Delivery Status Notification (Failure)', `An error occurred while trying to deliver the mail to the following recipients:\n${c.rcpt}\n\nThe remote server said: ${smtpLine(c.diag)}\n`, 'mail.us-west-2.awsapps.com', { headersOnly: true }),
  },
  {
    name: 'gmail',
    domain: 'gmail-dest.example',
    diags: [D('550', '5.1.1', "The email account that you tried to reach does not exist. Please try double-checking the recipient's email address for typos or unnecessary spaces.", 'hard'), D('452', '4.2.2', 'The email account that you tried to reach is over quota.', 'soft')],
    make: (c) =>
      report(
        c,
        'Mail Delivery Subsystem <mailer-daemon@googlemail.com>',
        'Delivery Status Notification (Failure)',
        `\n** Address not found **\n\nYour message wasn't delivered to ${c.rcpt} because the address couldn't be found, or is unable to receive mail.\n\nLearn more here: https://support.google.com/mail/?p=NoSuchUser\n\nThe response was:\n\n${smtpLine(c.diag)} ${c.n}si.${c.n} - gsmtp\n`,
        'mx.google.com',
        { charset: 'utf-8', extra: [auto, `In-Reply-To: ${c.origId}`] },
      ),
  },
  {
    name: 'google-workspace',
    domain: 'gws-customer.example',
    diags: [D('550', '5.7.1', 'Message rejected. Unauthenticated email is not accepted from this domain.', 'hard'), D('421', '4.7.28', 'Our system has detected an unusual rate of unsolicited mail originating from your IP address.', 'soft')],
    make: (c) =>
      report(
        c,
        'Mail Delivery Subsystem <mailer-daemon@googlemail.com>',
        'Delivery Status Notification (Failure)',
        `\n** Message blocked **\n\nYour message to ${c.rcpt} has been blocked. See technical details below for more information.\n\nThe response from the remote server was:\n${smtpLine(c.diag)}\n`,
        'mx.google.com',
        { charset: 'utf-8' },
      ),
  },
  {
    name: 'yahoo',
    domain: 'yahoo-user.example',
    diags: [D('554', null, "delivery error: dd This user doesn't have a yahoo.com account", 'hard'), D('554', null, 'delivery error: dd Sorry your message to this recipient cannot be delivered. This account has been disabled or discontinued', 'hard')],
    make: (c) =>
      plain(
        c,
        `MAILER-DAEMON@yahoo.com`,
        'Failure Notice',
        `Sorry, we were unable to deliver your message to the following address.\n\n<${c.rcpt}>:\n${c.diag.code}: ${c.diag.text} (${c.rcpt}) [-5] - mta${1000 + c.n}.mail.gq1.yahoo.com\n\n--- Below this line is a copy of the message.\n\n${originalMessage(c)}`,
      ),
  },
  {
    name: 'aol',
    domain: 'aol-user.example',
    diags: [D('554', null, 'delivery error: dd This user doesn\'t have a aol.com account', 'hard'), D('552', null, 'mailbox full', 'hard')],
    make: (c) =>
      plain(c, 'MAILER-DAEMON@aol.com', 'Failure Notice', `Sorry, we were unable to deliver your message to the following address.\n\n<${c.rcpt}>:\n${c.diag.code}: ${c.diag.text}\n\n--- Below this line is a copy of the message.\n\n${originalMessage(c)}`),
  },
  {
    name: 'icloud',
    domain: 'icloud-user.example',
    diags: [D('550', '5.1.1', 'user does not exist', 'hard'), D('552', '5.2.2', 'mailbox full', 'hard')],
    make: (c) =>
      report(
        c,
        `Mail Delivery System <MAILER-DAEMON@p${c.n}-mailgateway-smtp.icloud.com>`,
        'Delivery Status Notification (Failure)',
        `This is the mail system at host p${c.n}-mailgateway-smtp.icloud.com.\n\nI'm sorry to have to inform you that your message could not\nbe delivered to one or more recipients.\n\n<${c.rcpt}>: host mx01.mail.icloud.com[17.57.154.${c.n}] said: ${smtpLine(c.diag)} <${c.rcpt}>\n    (in reply to RCPT TO command)\n`,
        `p${c.n}-mailgateway-smtp.icloud.com`,
        { extra: [] },
      ),
  },
  {
    name: 'zoho',
    domain: 'zoho-user.example',
    diags: [D('550', null, 'Requested action not taken: mailbox unavailable', 'hard'), D('452', null, 'Recipient mailbox is full', 'soft')],
    make: (c) =>
      plain(
        c,
        'mailer-daemon@mail.zoho.com',
        'Undelivered Mail Returned to Sender',
        `This message was created automatically by mail delivery software.\nA message that you sent could not be delivered to one or more of its recipients. This is a permanent error.\n\n${c.rcpt}, ERROR CODE :${c.diag.code} - ${c.diag.text}\n\nReceived: from mail.${c.senderDomain} by mx.zohomail.com\nMessage-ID: ${c.origId}\nSubject: ${c.origSubject}\n`,
        { charset: 'utf-8', transfer: 'quoted-printable' },
      ),
  },
  {
    name: 'yandex',
    domain: 'yandex-user.example',
    diags: [D('550', '5.7.1', 'No such user!', 'hard'), D('452', '4.2.2', 'Mailbox is full', 'soft')],
    make: (c) =>
      report(
        c,
        `mailer-daemon@yandex.ru`,
        encodedWord('Недоставленное сообщение', 'utf-8', 'B'),
        `This is the MAILER-DAEMON, please DO NOT REPLY to this e-mail.\n\nHello!\n\nThis is a message from the mail delivery subsystem at forward${c.n}.mail.yandex.net.\n\nI'm sorry to inform you that your message could not be delivered to one or more recipients.\n\n<${c.rcpt}>: host ${c.mx}[${c.ip}] said: ${smtpLine(c.diag)}\n\nК сожалению, ваше письмо не может быть доставлено одному или нескольким получателям.\n`,
        `forward${c.n}.mail.yandex.net`,
        { charset: 'utf-8', extra: [] },
      ),
  },
  {
    name: 'mail-ru',
    domain: 'mailru-user.example',
    diags: [D('550', null, 'Message was not accepted -- invalid mailbox. Local mailbox is unavailable: user not found', 'hard'), D(null, null, 'retry timeout exceeded', 'soft')],
    make: (c) =>
      plain(
        c,
        'Mail Delivery System <mailer-daemon@corp.mail.ru>',
        'Mail failure.',
        `Это письмо создано автоматически сервером Mail.Ru,\nотвечать на него не нужно.\n\nК сожалению, Ваше письмо не может быть доставлено одному или нескольким получателям:\n\n${c.rcpt}\n\nРекомендуем Вам проверить корректность указания адресов получателей.\n\nThis message was created automatically by mail delivery software.\n\nA message that you sent could not be delivered to one or more of its\nrecipients. This is a permanent error. The following address(es) failed:\n\n  ${c.rcpt}\n    ${c.diag.code ? `SMTP error from remote mail server after RCPT TO:<${c.rcpt}>:\n    host ${c.mx} [${c.ip}]: ${smtpLine(c.diag)}` : c.diag.text}\n`,
        { charset: 'koi8-r', transfer: 'base64', extra: [`X-Failed-Recipients: ${c.rcpt}`, auto] },
      ),
  },
  {
    name: 'gmx',
    domain: 'gmx-user.example',
    diags: [D('550', '5.1.1', 'Requested action not taken: mailbox unavailable', 'hard'), D('452', '4.2.2', 'Mailbox full', 'soft')],
    make: (c) =>
      plain(
        c,
        '"Mail Delivery System" <mailer-daemon@gmx.net>',
        'Mail delivery failed: returning message to sender',
        `This message was created automatically by mail delivery software.\n\nA message that you sent could not be delivered to one or more of\nits recipients. This is a permanent error. The following address\nfailed:\n\n"${c.rcpt}":\nSMTP error from remote server for RCPT TO command, host: ${c.mx} (${c.ip}) reason: ${smtpLine(c.diag)}\n\n--- The header of the original message is following. ---\n\n${originalHeaders(c)}\n`,
        { charset: 'utf-8', transfer: 'quoted-printable' },
      ),
  },
  {
    name: 'web-de',
    domain: 'webde-user.example',
    diags: [D('550', null, 'Mailbox unavailable or access denied', 'hard'), D('554', '5.7.1', 'Transaction failed. Reject due to policy restrictions', 'hard')],
    make: (c) =>
      plain(
        c,
        '"Mail Delivery System" <mailer-daemon@web.de>',
        'Mail delivery failed: returning message to sender',
        `This message was created automatically by mail delivery software.\n\nA message that you sent could not be delivered to one or more of\nits recipients. This is a permanent error. The following address\nfailed:\n\n"${c.rcpt}":\nSMTP error from remote server for RCPT TO command, host: ${c.mx} (${c.ip}) reason: ${smtpLine(c.diag)}\n\n--- The header of the original message is following. ---\n\n${originalHeaders(c)}\n`,
        { charset: 'iso-8859-1', transfer: '8bit' },
      ),
  },
  {
    name: 'orange',
    domain: 'orange-user.example',
    diags: [D('550', '5.1.1', 'Adresse d au moins un destinataire invalide. Invalid recipient. OFR_416', 'hard'), D('421', null, 'Service refuse, veuillez essayer plus tard. Service refused, please try later. OFR_999', 'soft')],
    make: (c) =>
      report(
        c,
        `MAILER-DAEMON@orange.fr (Mail Delivery System)`,
        encodedWord('Votre message n\'a pas pu être délivré', 'iso-8859-1', 'Q'),
        `Bonjour,\n\nLe message que vous avez envoyé n'a pas pu être remis à un ou plusieurs destinataires.\n\n<${c.rcpt}> : le serveur distant ${c.mx} a répondu : ${smtpLine(c.diag)}\n\nCordialement,\nLe service de messagerie Orange\n`,
        'opmta1mto02nd1.mail.orange.fr',
        { charset: 'iso-8859-1', extra: [] },
      ),
  },
  {
    name: 'free',
    domain: 'free-user.example',
    diags: [D('550', '5.1.1', 'Recipient address rejected: User unknown in local recipient table', 'hard'), D('552', '5.2.2', 'Quota exceeded (mailbox for user is full)', 'hard')],
    make: (c) =>
      report(
        c,
        'MAILER-DAEMON@smtp.free.fr (Mail Delivery System)',
        'Undelivered Mail Returned to Sender',
        `Ceci est le logiciel de messagerie de la machine smtp.free.fr.\n\nJe suis au regret de vous informer que votre message n'a pas pu\nêtre remis à un ou plusieurs destinataires. Il est joint ci-dessous.\n\n<${c.rcpt}>: host ${c.mx}[${c.ip}] said: ${smtpLine(c.diag)} (in reply to RCPT TO command)\n`,
        'smtp.free.fr',
        { charset: 'utf-8', extra: [] },
      ),
  },
  {
    name: 'au-kddi',
    domain: 'ezweb.example',
    diags: [D(null, null, 'user unknown', 'hard'), D(null, null, 'The number of messages in recipient\'s mailbox exceeded the local limit.', 'soft')],
    make: (c) =>
      plain(
        c,
        `MAILER-DAEMON@${c.rcptDomain}`,
        encodedWord('メール配信エラー / Mail delivery failed', 'iso-2022-jp', 'B'),
        `Your mail sent on: ${c.origDate}\n   could not be delivered to the following address:\n\n    ${c.rcpt}\n    ${c.diag.text}\n\nお客様が送信されたメールは、以下の宛先に配信できませんでした。\n\n   ----- Original message header follows -----\n${originalHeaders(c, false)}\n`,
        { charset: 'iso-2022-jp', transfer: '7bit' },
      ),
  },
  {
    name: 'docomo',
    domain: 'docomo-user.example',
    diags: [D('550', null, 'Unknown user', 'hard'), D('550', null, 'Unknown user', 'hard')],
    make: (c) =>
      report(
        c,
        `Mail Delivery Subsystem <MAILER-DAEMON@mfsmax.${c.rcptDomain}>`,
        'Returned mail: see transcript for details',
        `The original message was received at ${c.origDate}\nfrom mail.${c.senderDomain} [198.51.100.20]\n\n   ----- The following addresses had permanent fatal errors -----\n<${c.rcpt}>\n    (reason: ${c.diag.code} ${c.diag.text} ${c.rcpt})\n\n   ----- Transcript of session follows -----\n... while talking to mfsmax.${c.rcptDomain}.:\n>>> DATA\n<<< ${c.diag.code} ${c.diag.text} ${c.rcpt}\n${c.diag.code} 5.1.1 <${c.rcpt}>... ${c.diag.text}\n`,
        `mfsmax.${c.rcptDomain}`,
        { headersOnly: true, extra: [] },
      ),
  },
  {
    name: 'softbank',
    domain: 'softbank-user.example',
    diags: [D('550', null, 'Unknown user', 'hard'), D(null, null, 'mailbox is full', 'soft')],
    make: (c) =>
      plain(
        c,
        `Mail Delivery System <MAILER-DAEMON@${c.rcptDomain}>`,
        encodedWord('配信エラー', 'iso-2022-jp', 'B'),
        `このメールは、メール配信ソフトウェアによって自動的に作成されました。\n\nお送りいただいたメールは、以下の宛先に配信できませんでした。\n\n<${c.rcpt}>: ${c.diag.code ? `${c.diag.code} ` : ''}${c.diag.text}\n\n------ 元のメッセージのヘッダ ------\n\n${originalHeaders(c, false)}\n`,
        { charset: 'iso-2022-jp', transfer: '7bit' },
      ),
  },
  {
    name: 'biglobe',
    domain: 'biglobe-user.example',
    diags: [D(null, null, "The number of messages in recipient's mailbox exceeded the local limit.", 'soft'), D(null, null, 'Recipient address does not exist (user unknown)', 'hard')],
    make: (c) =>
      plain(
        c,
        `postmaster@${c.rcptDomain}`,
        'Returned mail: Delivery failed',
        `   ----- The following addresses had delivery problems -----\n<${c.rcpt}>\n\n   ----- Non-delivered information -----\n${c.diag.text}\n\n   ----- Unsent message follows -----\n${originalMessage(c)}`,
        { charset: 'iso-2022-jp', transfer: '7bit' },
      ),
  },
  {
    name: 'mimecast',
    domain: 'mimecast-customer.example',
    diags: [D('550', null, 'Invalid Recipient - https://community.mimecast.com/docs/DOC-1369#550', 'hard'), D('451', null, 'Internal resource temporarily unavailable - https://community.mimecast.com/docs/DOC-1369#451', 'soft')],
    make: (c) => {
      const b = boundary(c, 'M');
      const html = `<html><body><table><tr><td><h2>Your message couldn't be delivered</h2><p>Your message to <b>${c.rcpt}</b> could not be delivered.</p><p>Reason: ${smtpLine(c.diag)}</p><p>Subject: ${c.origSubject}<br>Message-ID: ${c.origId}</p><p>Processed by Mimecast</p></td></tr></table></body></html>`;
      return {
        raw: message(
          head(c, `postmaster@${c.rcptDomain}`, `Undeliverable Mail: "${c.origSubject}"`, multipartType('alternative', b), [auto, 'X-MC-System: mimecast']),
          multipart(b, [leaf({ type: 'text/html', charset: 'utf-8', transfer: 'base64', body: html })]),
          c.eol,
        ),
        carriesMessageId: true,
      };
    },
  },
  {
    name: 'proofpoint',
    domain: 'pphosted-customer.example',
    diags: [D('550', '5.1.1', 'User unknown', 'hard'), D('554', '5.7.1', 'Message rejected by Proofpoint due to spam content', 'hard')],
    make: (c) =>
      report(
        c,
        `Mail Delivery Subsystem <MAILER-DAEMON@mx0a-00${c.n}.pphosted.com>`,
        'Returned mail: see transcript for details',
        `The original message was received at ${c.origDate}\nfrom mail.${c.senderDomain} [198.51.100.20]\n\n   ----- The following addresses had permanent fatal errors -----\n<${c.rcpt}>\n    (reason: ${smtpLine(c.diag)})\n`,
        `mx0a-00${c.n}.pphosted.com`,
      ),
  },
  {
    name: 'barracuda',
    domain: 'barracuda-customer.example',
    diags: [D('554', null, 'Service unavailable; Client host blocked using Barracuda Reputation', 'hard'), D('550', null, 'permanent failure for one or more recipients (blocked)', 'hard')],
    make: (c) =>
      plain(
        c,
        `postmaster@${c.rcptDomain}`,
        '**Message you sent blocked by our bulk email filter**',
        `Your message to: ${c.rcpt}\nwas blocked by our Spam Firewall. The email you sent with the following subject has NOT BEEN DELIVERED:\n\nSubject: ${c.origSubject}\n\nReason: ${smtpLine(c.diag)}\n`,
        { extra: [auto] },
      ),
  },
  {
    name: 'domino',
    domain: 'lotus-corp.example',
    diags: [D(null, null, `User not listed in Domino Directory`, 'hard'), D(null, null, 'Unable to deliver message: mail file is full', 'soft')],
    make: (c) =>
      plain(
        c,
        `Postmaster <postmaster@${c.rcptDomain}>`,
        `DELIVERY FAILURE: ${c.diag.text}`,
        `Your message\n\n  Subject: ${c.origSubject}\n\nwas not delivered to:\n\n  ${c.rcpt}\n\nbecause:\n\n  ${c.diag.text}\n`,
        { charset: 'iso-8859-1', transfer: '7bit', extra: [`In-Reply-To: ${c.origId}`] },
      ),
  },
  {
    name: 'groupwise',
    domain: 'novell-corp.example',
    diags: [D(null, null, 'user not found', 'hard'), D(null, null, 'mailbox full', 'soft')],
    make: (c) =>
      plain(c, `Mail Delivery System <postmaster@${c.rcptDomain}>`, `Undeliverable: ${c.origSubject}`, `The message that you sent was undeliverable to the following:\n\t${c.rcpt} (${c.diag.text})\n\nPossibly truncated original message follows:\n\n${originalMessage(c)}`),
  },
  {
    name: 'mdaemon',
    domain: 'mdaemon-site.example',
    diags: [UNKNOWN, D('452', '4.2.2', 'Mailbox full', 'soft')],
    make: (c) =>
      plain(
        c,
        `MDaemon@mail.${c.rcptDomain}`,
        `Permanent Delivery Failure`,
        `The attached message had PERMANENT fatal delivery errors!\n\nAfter one or more unsuccessful delivery attempts the attached message\nhas been removed from the mail queue on this server.  The number and\nfrequency of delivery attempts are determined by local configuration\nparameters.\n\nYOU DO NOT NEED TO RESEND YOUR MESSAGE.\n\n--- Session Transcript ---\n Sending <${c.sender}> to ${c.mx} (${c.ip})\n RCPT TO:<${c.rcpt}>\n ${smtpLine(c.diag)}\n--- End Transcript ---\n\n: Message contains [1] file attachments\n`,
        { extra: [auto] },
      ),
  },
  {
    name: 'messagelabs',
    domain: 'messagelabs-customer.example',
    diags: [D('550', null, 'Invalid recipient', 'hard'), D('553', null, 'sorry, that domain isn\'t in my list of allowed rcpthosts', 'hard')],
    make: (c) =>
      plain(
        c,
        'MAILER-DAEMON@messagelabs.com',
        'Mail Delivery Failure',
        `This is an automatically generated Delivery Status Notification.\n\nDelivery to the following recipients failed permanently:\n\n   * ${c.rcpt}\n\nReason: ${smtpLine(c.diag)}\n\n-------- Original message headers --------\n\n${originalHeaders(c)}\n`,
      ),
  },
  {
    name: 'kerio',
    domain: 'kerio-site.example',
    diags: [UNKNOWN, GREY],
    make: (c) =>
      plain(
        c,
        `Mail Delivery Subsystem <postmaster@mail.${c.senderDomain}>`,
        `Undeliverable mail: ${c.origSubject}`,
        `Your message did not reach some or all of the intended recipients.\n\n   Sent: ${c.origDate}\n   Subject: ${c.origSubject}\n\nThe following recipient(s) could not be reached:\n\n${c.rcpt}\n   Error Type: SMTP\n   Remote server (${c.ip}) issued an error.\n   hop count: 1\n   Error: ${smtpLine(c.diag)}\n\nKerio Connect ${c.n}.1.1 at mail.${c.senderDomain}\n`,
        { charset: 'utf-8', transfer: 'quoted-printable', extra: [auto] },
      ),
  },
];

export const HOLDOUT_DIAG_POOL = [UNKNOWN, NOUSER, FULL, FULL_PLAIN, DISABLED, GREY, POLICY, RATE, NODOMAIN];
