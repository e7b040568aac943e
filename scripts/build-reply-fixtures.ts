/**
 * Renders a hand-written reply corpus (fixtures/mail/replies/<set>.txt) into .eml files the way
 * real mail clients send them, plus the labels npm run eval:classify reads.
 *
 *   npx tsx scripts/build-reply-fixtures.ts holdout|tuning
 *
 * The texts are the fixture; this only wraps them. Each block of the source starts with
 *   === <lang> <i|n|u|o> <id> <gmail|outlook|apple|plain|html> [auto] [ret=YYYY-MM-DD|ret=none]
 * (i interested, n not_interested, u unsubscribe, o out_of_office; `auto` adds
 * Auto-Submitted: auto-replied; `ret` is the expected OOO return date). An optional first line
 * `Subject: ...` replaces the default "Re: <campaign subject>". The styles differ in MIME layout,
 * charset, transfer encoding and how the campaign message is quoted under the answer, because
 * real replies carry that history (with its unsubscribe footer) and the classifier must not
 * read it as the lead's words.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import iconv from 'iconv-lite';
import libqp from 'libqp';

const ROOT = path.resolve(import.meta.dirname, '..', 'fixtures', 'mail', 'replies');
const CLASSES = { i: 'interested', n: 'not_interested', u: 'unsubscribe', o: 'out_of_office' } as const;
type Lang = 'en' | 'de' | 'fr' | 'es' | 'pt' | 'nl';
type Style = 'gmail' | 'outlook' | 'apple' | 'plain' | 'html';

interface Original { subject: string; body: string; onWrote: string; outlook: [string, string, string, string]; appleWrote: string }

const SENT = 'Mon, 02 Nov 2026 09:34:00 +0000';
const ORIGINALS: Record<Lang, Original> = {
  en: {
    subject: 'Quick question about {company} onboarding',
    body: 'Hi {first},\n\nI noticed {company} is hiring onboarding specialists. We help teams like yours cut onboarding time in half with automated checklists.\n\nWould you be interested in a 15-minute call next week to see if it\'s a fit?\n\nBest,\nAlice Martin\nNorthwind Sales\n\nIf you\'d rather not hear from me, just reply "stop" or unsubscribe here:\nhttps://mail.northwind.example/u/{token}',
    onWrote: 'On Mon, Nov 2, 2026 at 9:34 AM Alice Martin <alice@northwind.example> wrote:',
    outlook: ['From', 'Sent', 'To', 'Subject'],
    appleWrote: 'On 2 Nov 2026, at 09:34, Alice Martin <alice@northwind.example> wrote:',
  },
  de: {
    subject: 'Kurze Frage zum Onboarding bei {company}',
    body: 'Hallo {first},\n\nich habe gesehen, dass {company} gerade Onboarding-Spezialisten sucht. Wir helfen Teams wie Ihrem, die Einarbeitungszeit mit automatisierten Checklisten zu halbieren.\n\nHätten Sie nächste Woche 15 Minuten für ein kurzes Gespräch?\n\nViele Grüße\nAlice Martin\nNorthwind Sales\n\nWenn Sie nichts mehr von mir hören möchten, antworten Sie einfach mit "stop" oder melden Sie sich hier ab:\nhttps://mail.northwind.example/u/{token}',
    onWrote: 'Am Mo., 2. Nov. 2026 um 09:34 Uhr schrieb Alice Martin <alice@northwind.example>:',
    outlook: ['Von', 'Gesendet', 'An', 'Betreff'],
    appleWrote: 'Am 02.11.2026 um 09:34 schrieb Alice Martin <alice@northwind.example>:',
  },
  fr: {
    subject: 'Petite question sur l\'onboarding chez {company}',
    body: 'Bonjour {first},\n\nJ\'ai vu que {company} recrute des chargés d\'onboarding. Nous aidons des équipes comme la vôtre à réduire de moitié le temps d\'intégration grâce à des checklists automatisées.\n\nSeriez-vous disponible pour un appel de 15 minutes la semaine prochaine ?\n\nBien cordialement,\nAlice Martin\nNorthwind Sales\n\nSi vous ne souhaitez plus recevoir mes messages, répondez simplement "stop" ou désinscrivez-vous ici :\nhttps://mail.northwind.example/u/{token}',
    onWrote: 'Le lun. 2 nov. 2026 à 09:34, Alice Martin <alice@northwind.example> a écrit :',
    outlook: ['De', 'Envoyé', 'À', 'Objet'],
    appleWrote: 'Le 2 nov. 2026 à 09:34, Alice Martin <alice@northwind.example> a écrit :',
  },
  es: {
    subject: 'Una pregunta rápida sobre el onboarding en {company}',
    body: 'Hola {first}:\n\nHe visto que {company} está contratando especialistas de onboarding. Ayudamos a equipos como el tuyo a reducir a la mitad el tiempo de incorporación con checklists automatizadas.\n\n¿Te interesaría una llamada de 15 minutos la semana que viene?\n\nUn saludo,\nAlice Martin\nNorthwind Sales\n\nSi prefieres no recibir más correos míos, responde "stop" o date de baja aquí:\nhttps://mail.northwind.example/u/{token}',
    onWrote: 'El lun, 2 nov 2026 a las 9:34, Alice Martin (<alice@northwind.example>) escribió:',
    outlook: ['De', 'Enviado el', 'Para', 'Asunto'],
    appleWrote: 'El 2 nov 2026, a las 9:34, Alice Martin <alice@northwind.example> escribió:',
  },
  pt: {
    subject: 'Uma pergunta rápida sobre o onboarding na {company}',
    body: 'Olá {first},\n\nVi que a {company} está contratando especialistas de onboarding. Ajudamos equipes como a sua a reduzir pela metade o tempo de integração com checklists automatizados.\n\nVocê teria 15 minutos para uma conversa na próxima semana?\n\nAbraços,\nAlice Martin\nNorthwind Sales\n\nSe preferir não receber mais meus e-mails, responda "stop" ou cancele a inscrição aqui:\nhttps://mail.northwind.example/u/{token}',
    onWrote: 'Em seg., 2 de nov. de 2026 às 09:34, Alice Martin <alice@northwind.example> escreveu:',
    outlook: ['De', 'Enviado', 'Para', 'Assunto'],
    appleWrote: 'Em 2 de nov. de 2026, à(s) 09:34, Alice Martin <alice@northwind.example> escreveu:',
  },
  nl: {
    subject: 'Korte vraag over onboarding bij {company}',
    body: 'Hoi {first},\n\nIk zag dat {company} onboarding-specialisten zoekt. Wij helpen teams zoals het jouwe de inwerktijd te halveren met geautomatiseerde checklists.\n\nHeb je volgende week 15 minuten voor een kort gesprek?\n\nGroet,\nAlice Martin\nNorthwind Sales\n\nWil je niets meer van mij horen? Antwoord dan "stop" of meld je hier af:\nhttps://mail.northwind.example/u/{token}',
    onWrote: 'Op ma 2 nov 2026 om 09:34 schreef Alice Martin <alice@northwind.example>:',
    outlook: ['Van', 'Verzonden', 'Aan', 'Onderwerp'],
    appleWrote: 'Op 2 nov 2026 om 09:34 heeft Alice Martin <alice@northwind.example> het volgende geschreven:',
  },
};

const PEOPLE: Array<[string, string, string]> = [
  ['Bob', 'Smith', 'acme'], ['Ines', 'Vogel', 'globex'], ['Camille', 'Roux', 'initech'], ['Diego', 'Ruiz', 'umbrella'],
  ['Joana', 'Lima', 'hooli'], ['Sanne', 'de Vries', 'vandelay'], ['Priya', 'Nair', 'soylent'], ['Tom', 'Becker', 'stark'],
];

interface Entry { lang: Lang; cls: keyof typeof CLASSES; id: string; style: Style; auto: boolean; ret?: string | null; subject?: string; text: string }

function parse(src: string): Entry[] {
  const entries: Entry[] = [];
  for (const block of src.split(/^=== /m).slice(1)) {
    const [head, ...rest] = block.split('\n');
    const [lang, cls, id, style, ...opts] = head.trim().split(/\s+/);
    if (!(lang in ORIGINALS) || !(cls in CLASSES) || !['gmail', 'outlook', 'apple', 'plain', 'html'].includes(style)) throw new Error(`bad header: ${head}`);
    let lines = rest;
    let subject: string | undefined;
    if (lines[0]?.startsWith('Subject: ')) { subject = lines[0].slice(9); lines = lines.slice(1); }
    const retOpt = opts.find((o) => o.startsWith('ret='));
    entries.push({
      lang: lang as Lang, cls: cls as Entry['cls'], id, style: style as Style, auto: opts.includes('auto'),
      ret: retOpt === undefined ? undefined : retOpt === 'ret=none' ? null : retOpt.slice(4),
      subject, text: lines.join('\n').trim(),
    });
  }
  return entries;
}

function seeded(id: string): Buffer { return createHash('sha256').update(id).digest(); }
function b32(buf: Buffer, n: number): string { return [...buf].map((b) => 'abcdefghijklmnopqrstuvwxyz234567'[b % 32]).join('').slice(0, n); }
function htmlEscape(s: string): string { return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;'); }
function toHtml(s: string): string { return s.split(/\n{2,}/).map((p) => `<div>${htmlEscape(p).replace(/\n/g, '<br>\n')}</div>`).join('\n<div><br></div>\n'); }
function qp(s: string, charset = 'utf-8'): string { return libqp.wrap(libqp.encode(charset === 'utf-8' ? Buffer.from(s, 'utf8') : iconv.encode(s, charset)), 76); }
function b64(s: string): string { return Buffer.from(s, 'utf8').toString('base64').replace(/.{76}/g, '$&\n'); }
function encodeWord(s: string): string { return /^[\x20-\x7e]*$/.test(s) ? s : `=?UTF-8?B?${Buffer.from(s, 'utf8').toString('base64')}?=`; }

function render(e: Entry, n: number): string {
  const h = seeded(`${e.lang}/${e.id}`);
  const [first, last, company] = PEOPLE[h[0] % PEOPLE.length];
  const Company = company[0].toUpperCase() + company.slice(1);
  const o = ORIGINALS[e.lang];
  const fill = (s: string) => s.replace(/\{company\}/g, Company).replace(/\{first\}/g, first).replace(/\{token\}/g, b32(h.subarray(8), 22));
  const origSubject = fill(o.subject);
  const origBody = fill(o.body);
  const origId = `<msg_${b32(h.subarray(1), 26)}.${h.subarray(20, 26).toString('hex')}@northwind.example>`;
  const day = 3 + (n % 16);
  const date = `${['Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun', 'Mon'][(day - 3) % 7]}, ${String(day).padStart(2, '0')} Nov 2026 ${String(7 + (h[2] % 11)).padStart(2, '0')}:${String(h[3] % 60).padStart(2, '0')}:${String(h[4] % 60).padStart(2, '0')} +0000`;
  const from = `${first} ${last} <${first.toLowerCase()}.${last.toLowerCase().replace(/\s+/g, '')}@${company}.example>`;
  const subject = e.subject ?? `${e.lang === 'de' ? 'AW' : e.lang === 'nl' && e.style === 'outlook' ? 'RE' : 'Re'}: ${origSubject}`;
  const text = e.text.replace(/\{company\}/g, Company).replace(/\{first\}/g, first);
  const headers = [
    `From: ${encodeWord(from.replace(/ <.*/, ''))} <${from.replace(/.*<|>/g, '')}>`,
    'To: Alice Martin <alice@northwind.example>',
    `Subject: ${encodeWord(subject)}`,
    `Date: ${date}`,
    `Message-ID: <${b32(h.subarray(4), 30)}@mail.${company}.example>`,
    `In-Reply-To: ${origId}`,
    `References: ${origId}`,
    'MIME-Version: 1.0',
  ];
  if (e.auto) headers.push('Auto-Submitted: auto-replied');
  const quotedGt = origBody.split('\n').map((l) => (l ? `> ${l}` : '>')).join('\n');
  const boundary = `----=_Part_${h.subarray(12, 20).toString('hex')}`;
  const alt = (plain: string, html: string, charset = 'utf-8') => [
    ...headers, `Content-Type: multipart/alternative; boundary="${boundary}"`, '',
    `--${boundary}`, `Content-Type: text/plain; charset="${charset}"`, 'Content-Transfer-Encoding: quoted-printable', '', qp(plain, charset), '',
    `--${boundary}`, 'Content-Type: text/html; charset="utf-8"', 'Content-Transfer-Encoding: quoted-printable', '', qp(html), '',
    `--${boundary}--`, '',
  ].join('\r\n');
  const quoteHtml = `<blockquote style="margin:0 0 0 .8ex;border-left:1px #ccc solid;padding-left:1ex">${toHtml(origBody)}</blockquote>`;
  switch (e.style) {
    case 'gmail': {
      const plain = `${text}\n\n${o.onWrote}\n\n${quotedGt}\n`;
      const html = `<div dir="ltr">${toHtml(text)}</div><br><div class="gmail_quote"><div dir="ltr" class="gmail_attr">${htmlEscape(o.onWrote)}<br></div>${quoteHtml}</div>`;
      return alt(plain, html);
    }
    case 'outlook': {
      const [f, s, t, sub] = o.outlook;
      const block = `________________________________\n${f}: Alice Martin <alice@northwind.example>\n${s}: ${SENT}\n${t}: ${from}\n${sub}: ${origSubject}\n\n${origBody}`;
      const plain = `${text}\n\n${block}\n`;
      const html = `<div class="WordSection1">${toHtml(text)}<div style="border:none;border-top:solid #E1E1E1 1.0pt;padding:3.0pt 0cm 0cm 0cm">${toHtml(block)}</div></div>`;
      const latin = iconv.decode(iconv.encode(plain, 'windows-1252'), 'windows-1252') === plain;
      return alt(plain, html, latin ? 'windows-1252' : 'utf-8');
    }
    case 'apple': {
      const plain = `${text}\n\n${o.appleWrote}\n\n${quotedGt}\n`;
      return [...headers, 'Content-Type: text/plain; charset=utf-8', 'Content-Transfer-Encoding: quoted-printable', '', qp(plain), ''].join('\r\n');
    }
    case 'plain':
      return [...headers, 'Content-Type: text/plain; charset=utf-8', 'Content-Transfer-Encoding: 8bit', '', text.replace(/\n/g, '\r\n'), ''].join('\r\n');
    case 'html': {
      const html = `<html><body>${toHtml(text)}<br><div>${htmlEscape(o.onWrote)}</div>${quoteHtml}</body></html>`;
      return [...headers, 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: base64', '', b64(html), ''].join('\r\n');
    }
  }
}

async function main(): Promise<void> {
  const set = process.argv[2];
  if (set !== 'holdout' && set !== 'tuning') throw new Error('usage: build-reply-fixtures.ts holdout|tuning');
  const entries = parse(await readFile(path.join(ROOT, `${set}.txt`), 'utf8'));
  const seen = new Set<string>();
  const messages = [];
  for (const [n, e] of entries.entries()) {
    const file = `replies/${set}/${e.lang}/${e.id}.eml`;
    if (seen.has(file)) throw new Error(`duplicate id ${file}`);
    seen.add(file);
    await mkdir(path.join(ROOT, set, e.lang), { recursive: true });
    // One line ending for the whole message, as a real client writes it.
    await writeFile(path.join(ROOT, '..', file), render(e, n).replace(/\r?\n/g, '\r\n'));
    messages.push({
      class: CLASSES[e.cls], lang: e.lang, client: e.style, variant: e.id, file, round: set === 'holdout' ? 6 : 7,
      ...(e.cls === 'o' && e.ret !== undefined ? { oooReturnDate: e.ret } : {}),
      ...(set === 'holdout' ? { set: 'holdout' } : {}),
    });
  }
  const description = set === 'holdout'
    ? 'Held-out replies (round 6): written before the classifier\'s rules were read and never used to change them. Rendered from holdout.txt by scripts/build-reply-fixtures.ts.'
    : 'Tuning replies (round 7): written to tune the classifier and train its model. Rendered from tuning.txt by scripts/build-reply-fixtures.ts.';
  await writeFile(path.join(ROOT, `${set}-labels.json`), JSON.stringify({ description, messages }, null, 1) + '\n');
  console.log(`${messages.length} messages written to fixtures/mail/replies/${set}/`);
}

await main();
