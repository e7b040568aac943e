import assert from 'node:assert/strict';
import { HybridClassifier, RuleClassifier, headerValue, type ClassifierInput } from '../../src/modules/inbound/classifier.ts';
import { analyzeMessage } from '../../src/modules/inbound/analyze.ts';
import { FEATURE_TEXT_CHARS, featuresOf, type ReplyModel } from '../../src/modules/inbound/model.ts';
import replyModel from '../../src/modules/inbound/reply-model.json' with { type: 'json' };
import { extractReturnDate } from '../../src/modules/inbound/classifier-dates.ts';
import { snippetOf, stripReply } from '../../src/modules/inbound/strip.ts';

const rules = new RuleClassifier();
const classify = (text: string, subject = 'Re: Quick question about Acme', headers: ClassifierInput['headers'] = {}) => rules.classify({ subject, text, headers });

describe('rule classifier: automatic replies', () => {
  it('RFC 3834 Auto-Submitted (anything but "no"), X-Autoreply, X-Autorespond and Precedence: auto_reply decide out_of_office', async () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ 'Auto-Submitted': 'auto-replied' }, 'header:auto-submitted'],
      [{ 'auto-submitted': 'auto-generated' }, 'header:auto-submitted'],
      [{ 'Auto-Submitted': 'auto-replied (vacation)' }, 'header:auto-submitted'],
      [{ 'X-Autoreply': 'yes' }, 'header:x-autoreply'],
      [{ 'X-Autorespond': 'Hoffmann Bau' }, 'header:x-autorespond'],
      [{ Precedence: 'auto_reply' }, 'header:precedence'],
    ];
    for (const [headers, decidedBy] of cases) {
      const r = await classify('Yes, sounds great', 'Re: Quick question', headers);
      assert.deepEqual(r, { classification: 'out_of_office', decidedBy, confidence: 0.98 }, JSON.stringify(headers));
    }
  });

  it('Auto-Submitted: no, X-Auto-Response-Suppress alone and Precedence: bulk do not make a reply automatic', async () => {
    const cases: Array<Record<string, string>> = [{ 'Auto-Submitted': 'no' }, { 'X-Auto-Response-Suppress': 'All' }, { Precedence: 'bulk' }];
    for (const headers of cases) {
      const r = await classify("Yes, let's talk on Tuesday.", 'Re: Quick question', headers);
      assert.equal(r.classification, 'interested', JSON.stringify(headers));
    }
  });

  it('reads mailparser header maps too', async () => {
    const headers = new Map<string, unknown>([['auto-submitted', 'auto-replied'], ['content-type', { value: 'text/plain', params: {} }]]);
    assert.equal(headerValue(headers, 'Auto-Submitted'), 'auto-replied');
    assert.equal(headerValue(headers, 'content-type'), 'text/plain');
    assert.equal(headerValue({ 'X-Autoreply': 'yes' }, 'x-autoreply'), 'yes');
    assert.equal((await classify('', 'Hello', headers)).decidedBy, 'header:auto-submitted');
  });

  it('auto-responder subjects in six languages, but not "Re: <our subject>"', async () => {
    const subjects: Array<[string, string]> = [
      ['Automatic reply: Quick question', 'en'],
      ['Out of Office: Quick question', 'en'],
      ['Abwesenheitsnotiz: Kurze Frage', 'de'],
      ['Réponse automatique : Petite question', 'fr'],
      ['Respuesta automática: Una pregunta', 'es'],
      ['Resposta automática: Uma pergunta', 'pt'],
      ['Automatisch antwoord: Korte vraag', 'nl'],
      ['Auto: Quick question', 'en'],
    ];
    for (const [subject, lang] of subjects) {
      const r = await classify('Thank you for your message.', subject);
      assert.equal(r.decidedBy, `pattern:ooo-subject:${lang}`, subject);
    }
    assert.equal((await classify('Sounds good, send times.', 'Re: Out of office software for Acme')).classification, 'interested');
  });

  it('a reply tagged by a mail gateway ("[EXTERNAL] RE: <our subject>") is still a reply: its subject is our wording', async () => {
    // Exchange transport rules, Google Workspace and Mimecast tag mail from outside: with such a
    // gateway in front of the sender account, every reply arrives with the tag before its "RE:".
    for (const subject of ['[EXTERNAL] RE: Out of office coverage for Acme', 'EXT: Re: Out of office coverage for Acme', '*EXTERNAL* AW: Out of office coverage for Acme', 'Re：Out of office coverage for Acme']) {
      assert.equal((await classify('Sounds good, send times.', subject)).classification, 'interested', subject);
    }
    for (const subject of ['[External] RE: Take us off manual onboarding', '[EXT] Re: Unsubscribe from busywork']) {
      assert.equal((await classify("Sounds good, let's talk.", subject)).classification, 'interested', subject);
    }
    // What an auto-responder puts before the prefix still names it; a tagged auto-responder subject too.
    assert.equal((await classify('Thank you for your message.', '[Auto-Reply] Re: Quick question')).decidedBy, 'pattern:ooo-subject:en');
    assert.equal((await classify('Thank you for your message.', '[EXTERNAL] Automatic reply: Quick question')).decidedBy, 'pattern:ooo-subject:en');
    // A tagged subject of the lead's own that is a stop word, with nothing in the body.
    assert.equal((await classify('', '[EXTERNAL] Unsubscribe')).decidedBy, 'lexicon:unsubscribe:stop-word');
  });

  it('out-of-office bodies in six languages need an auto-responder phrase, not just a holiday mention', async () => {
    const bodies: Array<[string, string]> = [
      ['I am currently out of the office with limited access to email.', 'en'],
      ['Ich bin bis zum 4. Dezember außer Haus. In dringenden Fällen wenden Sie sich an info@example.org.', 'de'],
      ['Je suis actuellement absent du bureau. Pour toute demande urgente, contactez Paul.', 'fr'],
      ['Estoy fuera de la oficina. Para asuntos urgentes, escriba a soporte@example.org.', 'es'],
      ['Estou de férias, com acesso limitado ao e-mail.', 'pt'],
      ['Ik ben tot en met 27 november afwezig. Voor dringende zaken: info@example.org.', 'nl'],
    ];
    for (const [text, lang] of bodies) {
      const r = await classify(text);
      assert.equal(r.classification, 'out_of_office', text);
      assert.equal(r.decidedBy, `pattern:ooo-body:${lang}`, text);
    }
    assert.equal((await classify("I'm on holiday next week, but let's talk after that. How about the 24th?")).classification, 'interested');
  });

  it('an unsubscribe request wins over auto-reply headers: our List-Unsubscribe mailto sent by a mail client, or a reply that is only a stop word', async () => {
    // What a mail client sends for its reader through our mailto (`?subject=unsubscribe`), some
    // marking it Auto-Submitted and adding a sentence of their own; and an answer of one word.
    const requests: Array<[string, string, Record<string, string>]> = [
      ['This message was automatically generated by Gmail.', 'unsubscribe', { 'Auto-Submitted': 'auto-generated' }],
      ['', 'Unsubscribe', { 'Auto-Submitted': 'auto-generated' }],
      ['This is an automated message sent on behalf of the recipient to unsubscribe them.', 'unsubscribe', { 'Auto-Submitted': 'auto-generated', 'X-Autoreply': 'yes' }],
      ['unsubscribe', 'Re: Quick question', { 'Auto-Submitted': 'auto-generated' }],
      ['Stop.', 'RE: Quick question', { 'X-Autorespond': 'yes' }],
      ['abmelden', 'AW: Kurze Frage', { Precedence: 'auto_reply' }],
    ];
    for (const [text, subject, headers] of requests) {
      assert.deepEqual(await classify(text, subject, headers), { classification: 'unsubscribe', decidedBy: 'lexicon:unsubscribe:stop-word', confidence: 0.9 }, `${subject} / ${text}`);
    }
    // An auto-responder's own words about unsubscribing do not make it a request.
    const ooo = await classify('I am out of the office until Monday. To unsubscribe from our newsletter, visit acme.example/preferences.', 'Automatic reply: Quick question', { 'Auto-Submitted': 'auto-replied' });
    assert.equal(ooo.classification, 'out_of_office');
    assert.equal((await classify('Please remove me from your list.', 'Re: Quick question', { 'Auto-Submitted': 'auto-replied' })).classification, 'out_of_office', 'only the request forms win over the headers');
  });

  it("ticket systems' acknowledgements are automatic answers without any auto-reply header; a person mentioning a ticket is not", async () => {
    const acks: Array<[string, string, string]> = [
      ['[Ticket #48213] Re: Quick question', 'Thank you for contacting Initech Support. One of our agents will get back to you shortly.', 'en'],
      ['Re: Quick question', 'Your request (#48213) has been received and is being reviewed by our support staff.', 'en'],
      ['Re: Quick question', 'A new ticket has been created for your message. Reply to this email to add comments.', 'en'],
      ['REQ0048213 opened: Quick question', 'Your request REQ0048213 has been received and assigned to the IT Service Desk.', 'en'],
      ['AW: Kurze Frage', 'Ihre Anfrage (48213) ist bei uns eingegangen und wird von unseren Mitarbeitern geprüft.', 'de'],
      ['RE: Petite question', 'Votre demande (48213) a bien été reçue et va être examinée par notre équipe.', 'fr'],
      ['RE: Una pregunta', 'Su solicitud (48213) ha sido recibida y está siendo revisada por nuestro equipo de soporte.', 'es'],
      ['RE: Uma pergunta', 'Recebemos sua solicitação. O chamado 48213 foi aberto.', 'pt'],
      ['RE: Korte vraag', 'Uw melding is in goede orde ontvangen. Een van onze medewerkers neemt zo spoedig mogelijk contact met u op.', 'nl'],
    ];
    for (const [subject, text, lang] of acks) {
      const r = await classify(text, subject);
      assert.equal(r.classification, 'out_of_office', text);
      assert.equal(r.decidedBy, `pattern:auto-ack:${lang}`, text);
    }
    // People: a ticket mentioned, a helpdesk's tag on a person's answer, "we have received your email".
    const people: Array<[string, string, string]> = [
      ['Re: Quick question', "I opened ticket #4432 with IT about exactly this. We're interested, call me Thursday?", 'interested'],
      ['[#SUP-2231] Re: Quick question', "I've forwarded this to our head of ops, she handles this.", 'interested'],
      ['Re: Quick question', 'We have received your email, thanks. Not interested.', 'not_interested'],
      ['[Ticket #48213] Re: Quick question', 'Please remove me from your list.', 'unsubscribe'],
      ['Re: Quick question', 'Thanks for reaching out to our support team lead, Dana. She is interested in a demo next week.', 'interested'],
    ];
    for (const [subject, text, classification] of people) assert.equal((await classify(text, subject)).classification, classification, `${subject} / ${text}`);
  });
});

describe('rule classifier: unsubscribe, not interested, interested', () => {
  it('requests to be removed or to stop are unsubscribe, in six languages', async () => {
    const texts: Array<[string, string]> = [
      ['please remove me from your list', 'en'],
      ["Please don't email me again.", 'en'],
      ['Bitte nehmen Sie mich aus Ihrem Verteiler.', 'de'],
      ['Merci de me retirer de votre liste de diffusion.', 'fr'],
      ['Por favor, denme de baja de su lista.', 'es'],
      ['Parem de me enviar e-mails.', 'pt'],
      ['Verwijder mij alstublieft uit uw mailinglijst.', 'nl'],
    ];
    for (const [text, lang] of texts) assert.equal((await classify(text)).decidedBy, `lexicon:unsubscribe:${lang}`, text);
    assert.equal((await classify('Stop')).decidedBy, 'lexicon:unsubscribe:stop-word');
    assert.equal((await classify("I've asked twice now. Stop.")).classification, 'unsubscribe');
    assert.equal((await classify('', 'Unsubscribe')).classification, 'unsubscribe');
    assert.equal((await classify('Not interested. Remove my email from your database.')).classification, 'unsubscribe');
    // "stop" inside a sentence is not a stop request
    assert.equal((await classify('Stop by our booth at the fair, happy to chat there!')).classification, 'interested');
  });

  it('"not interested" is not counted as "interested"; timing deferrals are not interested', async () => {
    const r = await classify('Not interested, thanks.');
    assert.equal(r.classification, 'not_interested');
    assert.equal(r.decidedBy, 'lexicon:not_interested:en');
    assert.equal((await classify('Not interested right now, but try again next quarter.')).classification, 'not_interested');
    assert.equal((await classify('Aktuell kein Bedarf. Melden Sie sich gerne in 6 Monaten wieder.')).classification, 'not_interested');
    assert.equal((await classify('Thanks Alice, but we are way too small for this.')).classification, 'not_interested');
    assert.equal((await classify('Nope.')).decidedBy, 'lexicon:not_interested:bare-no');
  });

  it('a real request after a polite "thanks, but" wins', async () => {
    assert.equal((await classify('Thanks, but can you send me the pricing first? Then we can book a call.')).classification, 'interested');
  });

  it('positive replies are interested with a higher confidence than a reply with no cue at all', async () => {
    const yes = await classify("Yes let's talk. Tuesday or Wednesday afternoon works for me.");
    assert.equal(yes.classification, 'interested');
    assert.equal(yes.decidedBy, 'lexicon:interested:en');
    const bare = await classify('Who are you working with in our region?');
    assert.deepEqual(bare, { classification: 'interested', decidedBy: 'default:human-reply', confidence: 0.5 });
    assert.ok(yes.confidence > bare.confidence && yes.confidence <= 1);
  });
});

describe('quoted history and signatures', () => {
  const ours = 'Would you be interested in a call?\n\nIf not, reply "stop" or unsubscribe here.';

  it('cuts wrapped "On ... wrote:" headers and their equivalents in six languages, and ">" lines', () => {
    const headers = [
      'On Mon, Nov 9, 2026 at 10:02 AM Alice Martin <\nalice@northwind.example> wrote:',
      'Am Mo., 9. Nov. 2026 um 10:02 Uhr schrieb Alice Martin <alice@northwind.example>:',
      'Le lun. 9 nov. 2026 à 10:02, Alice Martin <alice@northwind.example> a\nécrit :',
      'El lun, 9 nov 2026 a las 10:02, Alice Martin (<alice@northwind.example>)\nescribió:',
      'Em seg., 9 de nov. de 2026 às 10:02, Alice Martin <alice@northwind.example> escreveu:',
      'Op ma 9 nov 2026 om 10:02 schreef Alice Martin <alice@northwind.example>:',
      'Alice Martin <alice@northwind.example> wrote:',
    ];
    for (const h of headers) {
      const stripped = stripReply(`Yes please.\n\n${h}\n\n${ours.replace(/^/gm, '> ')}\n`);
      assert.equal(stripped, 'Yes please.', h);
    }
    assert.equal(stripReply('Sounds good.\n> quoted line\nSee you then.'), 'Sounds good.\nSee you then.');
  });

  it('cuts Outlook "From:/Sent:" blocks (localized) and "-----Original Message-----"', () => {
    const blocks = [
      '________________________________\nFrom: Alice Martin <alice@northwind.example>\nSent: Monday, November 9, 2026 10:02 AM\nTo: Bob <bob@acme.example>\nSubject: Quick question',
      'Von: Alice Martin <alice@northwind.example>\nGesendet: Montag, 9. November 2026 10:02\nAn: Bob <bob@acme.example>\nBetreff: Kurze Frage',
      'De : Alice Martin <alice@northwind.example>\nEnvoyé : lundi 9 novembre 2026 10:02\nÀ : Bob\nObjet : Petite question',
      'Van: Alice Martin\nVerzonden: maandag 9 november 2026 10:02\nAan: Bob\nOnderwerp: Korte vraag',
      '-----Original Message-----\nFrom: Alice Martin [mailto:alice@northwind.example]\nSent: Monday, November 9, 2026 10:02 AM',
      '-------- Mensagem original --------\nDe: Alice Martin <alice@northwind.example>',
    ];
    for (const b of blocks) assert.equal(stripReply(`No thanks.\n\n${b}\n\n${ours}`), 'No thanks.', b);
  });

  it('cuts the "-- " signature and mobile signatures; keeps ordinary text that merely starts like a header', () => {
    assert.equal(stripReply('Call me Tuesday.\n-- \nBob Smith\nAcme | unsubscribe from our newsletter'), 'Call me Tuesday.');
    assert.equal(stripReply('Ja, gerne.\n\nVon meinem iPhone gesendet\n\n> Am 09.11.2026 um 10:02 schrieb Alice:'), 'Ja, gerne.');
    assert.equal(stripReply('Sí.\n\nEnviado desde mi iPhone'), 'Sí.');
    assert.equal(stripReply('On Tuesday I can do 3pm.\nFrom: the ops side we are ready.'), 'On Tuesday I can do 3pm.\nFrom: the ops side we are ready.');
  });

  it('the snippet is the first 200 characters with whitespace collapsed', () => {
    const long = 'word '.repeat(100);
    const s = snippetOf(`  Hello\n\n  there\t ${long}`);
    assert.ok(s.startsWith('Hello there word word'));
    assert.ok(Array.from(s).length <= 200);
    assert.equal(snippetOf('a\u00e9\n b'), 'a\u00e9 b');
  });
});

describe('out-of-office return dates', () => {
  const nov = new Date('2026-11-10T09:00:00Z');
  const day = (d: Date | null) => d?.toISOString().slice(0, 10) ?? null;

  it('finds the stated return date in six languages', () => {
    assert.equal(day(extractReturnDate("I'll be back on 12 May.", nov)), '2027-05-12');
    assert.equal(day(extractReturnDate('I will return on November 30th.', nov)), '2026-11-30');
    assert.equal(day(extractReturnDate('Ich bin zurück am 30.11. und dann wieder erreichbar.', nov)), '2026-11-30');
    assert.equal(day(extractReturnDate('Je serai de retour le 2 décembre.', nov)), '2026-12-02');
    assert.equal(day(extractReturnDate('Regresaré el 3 de diciembre.', nov)), '2026-12-03');
    assert.equal(day(extractReturnDate('Estarei de volta no dia 30 de novembro.', nov)), '2026-11-30');
    assert.equal(day(extractReturnDate('Ik ben vanaf 1 december weer aanwezig.', nov)), '2026-12-01');
  });

  it('prefers the return over the end of absence; "through" and "einschließlich" mean the next day', () => {
    assert.equal(day(extractReturnDate('Ich bin bis zum 27. November im Urlaub und ab dem 30. November wieder erreichbar.', nov)), '2026-11-30');
    assert.equal(day(extractReturnDate('Ich bin bis einschließlich 27.11.2026 nicht im Büro.', nov)), '2026-11-28');
    assert.equal(day(extractReturnDate('Ik ben tot en met 4 december afwezig.', nov)), '2026-12-05');
    assert.equal(day(extractReturnDate('Out of office until 12/01/2026.', nov, true)), '2026-12-01');
    assert.equal(day(extractReturnDate('Absent jusqu’au 12/01/2026.', nov)), '2026-01-12');
  });

  it('a date without a year well before the reply is next year; no date or no reference gives null', () => {
    assert.equal(day(extractReturnDate('Back on 5 January.', new Date('2026-12-20T00:00:00Z'))), '2027-01-05');
    assert.equal(extractReturnDate('I am out of the office this week.', nov), null);
    assert.equal(extractReturnDate('Back on 5 January.', null), null);
    assert.equal(day(extractReturnDate('Back on 5 January 2027.', null)), '2027-01-05');
  });

  it('a date without a year a few days before the reply is this past one, not a year on', () => {
    // An auto-reply left on after the holidays, read on 3 January: it was 2027-12-31 (a year's postponement).
    assert.equal(day(extractReturnDate('I am out of the office until 31 December.', new Date('2027-01-03T10:00:00Z'))), '2026-12-31');
    assert.equal(day(extractReturnDate('Ich bin bis einschließlich 31.12. nicht im Büro.', new Date('2027-01-02T10:00:00Z'))), '2027-01-01');
    // Written on New Year's Eve in New York (23:30 -05:00), already 1 January 2027 in UTC.
    assert.equal(day(extractReturnDate('Back on 31 December.', new Date('2027-01-01T04:30:00Z'))), '2026-12-31');
    // Still next year when well before, this year when ahead.
    assert.equal(day(extractReturnDate('Back on 20 December.', new Date('2027-01-05T10:00:00Z'))), '2027-12-20');
    assert.equal(day(extractReturnDate('Back on 7 January.', new Date('2027-01-05T10:00:00Z'))), '2027-01-07');
  });

  it('a return word between two dates is the later one\'s: the start of the absence is never the return', () => {
    const dec = new Date('2026-12-18T10:00:00Z');
    // Each gave the first date: 21 December (nothing postponed) or 11 May (a day early).
    assert.equal(day(extractReturnDate('I will be out of the office from Dec 21 through Jan 1 and back on Jan 4.', dec, true)), '2027-01-04');
    assert.equal(day(extractReturnDate('Je suis absent du 21 décembre au 3 janvier, de retour le 4 janvier.', dec)), '2027-01-04');
    assert.equal(day(extractReturnDate('Estoy fuera del 21/12 al 3/1, de vuelta el 4/1.', dec)), '2027-01-04');
    assert.equal(day(extractReturnDate('Out until May 11, back May 12.', dec, true)), '2027-05-12');
    // A return word after the date it belongs to still ties it.
    assert.equal(day(extractReturnDate('Ich bin bis 6.1. im Urlaub und ab 7.1. wieder erreichbar.', dec)), '2027-01-07');
    assert.equal(day(extractReturnDate('Ik ben van 21-12 tot 3-1 afwezig en vanaf 4 januari weer aanwezig.', dec)), '2027-01-04');
    assert.equal(day(extractReturnDate('Ich bin ab dem 7. Januar wieder im Büro, vom 23.12. bis 6.1. bin ich nicht erreichbar.', dec)), '2027-01-07');
    assert.equal(day(extractReturnDate('Ik ben vanaf 4 januari weer aanwezig, tot 3 januari afwezig.', dec)), '2027-01-04');
  });
});

describe('reply classifier: rules, then the shipped model (issue 19)', () => {
  const mail = (text: string, subject = 'Re: Quick question') =>
    `From: a@lead.example\r\nTo: alice@acme.example\r\nSubject: ${subject}\r\nDate: Mon, 02 Nov 2026 10:00:00 +0000\r\nMessage-ID: <m1@lead.example>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n${text}\r\n`;

  it('a reply no phrase recognises goes to the model instead of defaulting to interested', async () => {
    const a = await analyzeMessage(mail('We are winding down this business line, so nothing for us here.'));
    assert.deepEqual([a.classification, a.decidedBy], ['not_interested', 'model:nb:not_interested']);
    assert.ok(a.confidence > 0.5 && a.confidence <= 0.9);
  });

  it('the rules still decide where they match; the model never decides out-of-office', async () => {
    assert.equal((await analyzeMessage(mail('Please remove me from your list.'))).decidedBy, 'lexicon:unsubscribe:en');
    const hybrid = new HybridClassifier(replyModel as unknown as ReplyModel);
    const r = await hybrid.classify({ subject: 'Re: x', text: 'vacation vacances urlaub férias vakantie', headers: {} });
    assert.notEqual(r.classification, 'out_of_office');
  });

  it('with no word the model knows, the old default stands: interested at 0.5, for a person to read', async () => {
    const a = await analyzeMessage(mail('Zxqv.'));
    assert.deepEqual([a.classification, a.decidedBy, a.confidence], ['interested', 'default:human-reply', 0.5]);
  });
});

describe('reply model features: long texts', () => {
  it('an address is one "email" feature, told by position as the pattern \\S+@\\S+\\.\\S+ tells it', () => {
    const has = (text: string) => featuresOf({ subject: '', text }).includes('w:email');
    for (const t of ['write to a@b.co', 'x a@b.c. y', '@a@b.co', 'mail:ann.lee+x@acme.example.com!']) assert.ok(has(t), t);
    for (const t of ['@b.co', 'a@.c', 'a@bc', 'a@b.', 'no address here']) assert.ok(!has(t), t);
  });

  it('a reply of megabytes without a space (1 MB, and an address at its end) has the features of its start only', () => {
    const long = 'x'.repeat(1024 * 1024) + '@example.com';
    const features = featuresOf({ subject: 'Re: hi', text: `thanks, interested ${long}` });
    assert.ok(features.includes('w:interested'));
    assert.ok(!features.includes('w:email'), 'the address lies past the part that is read');
    // 3- to 5-character pieces of the first FEATURE_TEXT_CHARS characters at most, not of the megabyte.
    assert.ok(features.length < 3 * FEATURE_TEXT_CHARS, String(features.length));
    assert.deepEqual(featuresOf({ subject: '', text: 'x'.repeat(FEATURE_TEXT_CHARS) }), featuresOf({ subject: '', text: 'x'.repeat(FEATURE_TEXT_CHARS * 3) }));
  });
});
