// The planner's pure parts (asks, objections, language) and the offline composer, on contexts
// built by hand: every approach and language, instructions, and what must never appear.
import assert from 'node:assert/strict';
import { extractAsks, detectLanguage, detectObjection, languageOfTag } from '../../src/modules/drafts/asks.ts';
import { composeOffline } from '../../src/modules/drafts/offline.ts';
import { judgeDraft } from '../../src/modules/drafts/judge.ts';
import type { DraftContext } from '../../src/modules/drafts/planner.ts';
import type { KbHit } from '../../src/modules/drafts/kb.ts';

const KB: KbHit[] = [
  { id: 'kb_1', title: 'Pricing', body: 'The Team plan is $49 per rep per month, billed annually. Volume discounts start at 25 seats. https://acme.example/pricing', score: 1, matchedBy: 'fulltext' },
  { id: 'kb_2', title: 'Case study: Contoso', body: 'Contoso cut ramp time from 5 months to 3 months with Acme.', score: 1, matchedBy: 'fulltext' },
  { id: 'kb_3', title: 'Precios', body: 'El plan Team cuesta 49 USD por representante al mes.', score: 1, matchedBy: 'trigram' },
];

function ctx(over: Partial<DraftContext> & { last?: string } = {}): DraftContext {
  const last = over.last ?? 'What does pricing look like for 20 reps? Could we talk next Tuesday?';
  return {
    workspaceId: 'ws_1',
    threadId: 'thr_1',
    thread: { subject: 'Re: Idea', contactEmail: 'dana@northwind.example', contactName: 'Dana Reyes', category: 'A', status: 'new' },
    contact: { firstName: 'Dana', lastName: 'Reyes', company: 'Northwind', jobTitle: null, customFields: {} },
    sdr: { id: 'sdr_1', name: 'Sam Rivera', email: 'sam@acme.example', tone: null, signature: 'Sam Rivera\nAcme', calendarUrl: 'https://cal.acme.example/sam', language: null },
    campaignName: null,
    handoffNote: null,
    history: [{ direction: 'inbound', from: 'dana@northwind.example', at: '2026-11-22T00:00:00Z', subject: 'Re: Idea', text: last }],
    lastProspectMessage: last,
    knowledge: KB,
    asks: extractAsks(last),
    objection: detectObjection(last),
    appliedRules: [],
    language: 'en',
    writerAllowed: { domains: ['acme.example', 'cal.acme.example'], emails: ['sam@acme.example'] },
    sendAllowed: { domains: ['acme.example', 'cal.acme.example'], emails: ['sam@acme.example', 'dana@northwind.example'] },
    participants: ['dana@northwind.example', 'sam@acme.example'],
    ...over,
  };
}

describe('drafts: asks, objections, language', () => {
  it('finds asks by kind, one per kind, with the sentence and the matching word', () => {
    const asks = extractAsks('Thanks! What does it cost per seat? Are you SOC 2 compliant? Can we do a call Tuesday? Also, what is the price for 50?');
    assert.deepEqual(
      asks.map((a) => a.kind),
      ['pricing', 'security', 'meeting'],
    );
    assert.equal(asks[0].text, 'What does it cost per seat?');
    assert.equal(asks[0].keyword, 'cost');
  });
  it('a topic mentioned without asking is not an ask; pricing and a dated meeting are', () => {
    assert.deepEqual(extractAsks('We use it for call coaching. Our CRM is Salesforce.'), []);
    assert.deepEqual(
      extractAsks("I'm free Tuesday at 2pm. Pricing matters to us.").map((a) => a.kind),
      ['meeting', 'pricing'],
    );
    assert.deepEqual(
      extractAsks('How did you find us?').map((a) => a.kind),
      ['question'],
    );
  });
  it('asks in es, pt, fr, de', () => {
    assert.equal(extractAsks('¿Cuál es el precio para 10 personas?')[0].kind, 'pricing');
    assert.equal(extractAsks('Podemos marcar uma reunião na próxima semana?')[0].kind, 'meeting');
    assert.equal(extractAsks("Pouvez-vous m'envoyer plus d'informations ?")[0].kind, 'information');
    assert.equal(extractAsks('Was kostet das für 30 Nutzer?')[0].kind, 'pricing');
  });
  it('objections: budget, competitor, timing, none', () => {
    assert.equal(detectObjection('Looks good but we have no budget until next quarter.'), 'budget');
    assert.equal(detectObjection('We already use Gong for this.'), 'competitor');
    assert.equal(detectObjection('Not a priority right now, circle back in Q3.'), 'timing');
    assert.equal(detectObjection('Sounds great, send me the pricing.'), null);
  });
  it('language from common words, and from a profile tag', () => {
    assert.equal(detectLanguage('Hola, gracias por el correo. ¿Cuál es el precio?'), 'es');
    assert.equal(detectLanguage('Olá, você pode me enviar o preço? Obrigado'), 'pt');
    assert.equal(detectLanguage('Bonjour, pouvez-vous nous envoyer le prix ? Merci'), 'fr');
    assert.equal(detectLanguage('Hallo, was ist der Preis für uns? Danke'), 'de');
    assert.equal(detectLanguage('Thanks, what would the next step be for the team?'), 'en');
    assert.equal(detectLanguage('ok'), null);
    assert.equal(languageOfTag('pt-BR'), 'pt');
    assert.equal(languageOfTag('ja'), null);
  });
});

describe('drafts: the offline composer', () => {
  it('answers each ask from the knowledge base, offers the calendar link, signs with the profile; passes the judge', () => {
    const c = ctx();
    for (const style of ['direct_answer', 'question_led', 'proof_led'] as const) {
      const d = composeOffline(c, style, null);
      assert.match(d.bodyText, /^Hi Dana,\n\n/);
      assert.match(d.bodyText, /\$49 per rep per month/);
      assert.ok(d.bodyText.includes('https://cal.acme.example/sam'));
      assert.match(d.bodyText, /Northwind/);
      assert.match(d.bodyText, /\nBest,\nSam Rivera\nAcme$/);
      assert.doesNotMatch(d.bodyText, /\{\{|\[[A-Z]/);
      const j = judgeDraft({ bodyText: d.bodyText, contactName: 'Dana', company: 'Northwind', lastProspectMessage: c.lastProspectMessage, allowedDomains: c.sendAllowed.domains });
      assert.ok(j.scores.overall >= 0.6, `${style}: ${JSON.stringify(j)}`);
    }
    assert.match(composeOffline(c, 'question_led', null).bodyText, /what would Northwind most want to solve first\?/);
    assert.match(composeOffline(c, 'proof_led', null).bodyText, /Contoso cut ramp time/);
  });
  it('an ask the knowledge base cannot answer gets a promise, never an invented answer', () => {
    const d = composeOffline(ctx({ knowledge: [], last: 'Do you support SSO with Okta? Send me details please.' }), 'direct_answer', null);
    assert.match(d.bodyText, /On security: I will confirm the exact details/);
    assert.match(d.rationale, /no knowledge-base entry for security/);
  });
  it('an objection is acknowledged and the next step is soft', () => {
    const d = composeOffline(ctx({ last: 'We have no budget until next quarter.' }), 'direct_answer', null);
    assert.match(d.bodyText, /Understood on budget/);
    assert.match(d.bodyText, /checked back when you plan next quarter/);
    assert.doesNotMatch(d.bodyText, /20-minute call/);
  });
  it('writes in the context language and prefers the knowledge entry in that language', () => {
    const d = composeOffline(ctx({ language: 'es', last: '¿Cuál es el precio para un equipo de 10 personas?' }), 'direct_answer', null);
    assert.match(d.bodyText, /^Hola Dana,/);
    assert.match(d.bodyText, /49 USD por representante/);
    assert.match(d.bodyText, /\nSaludos,\n/);
  });
  it('instructions it can honour (short, no link, no call, formal) and the ones it cannot', () => {
    const d = composeOffline(ctx(), 'proof_led', 'Keep it short, formal, and no calendar link');
    assert.match(d.bodyText, /^Dear Dana,/);
    assert.ok(!d.bodyText.includes('https://cal.acme.example'));
    assert.doesNotMatch(d.bodyText, /Contoso/, 'short: no proof paragraph');
    assert.match(d.bodyText, /Kind regards,/);
    assert.match(d.rationale, /instructions applied as: short, noLink, formal/);
    assert.match(composeOffline(ctx(), 'direct_answer', 'mention our webinar').rationale, /need an LLM writer/);
    assert.doesNotMatch(composeOffline(ctx(), 'direct_answer', "don't propose a call").bodyText, /20-minute/);
  });
  it('no name, no company, no calendar: still a complete draft', () => {
    const d = composeOffline(
      ctx({ contact: { firstName: null, lastName: null, company: null, jobTitle: null, customFields: {} }, sdr: { ...ctx().sdr, calendarUrl: null, signature: null } }),
      'direct_answer',
      null,
    );
    assert.match(d.bodyText, /^Hi there,/);
    assert.match(d.bodyText, /Let me know a time that suits you\./);
    assert.match(d.bodyText, /Best,\nSam Rivera$/);
  });
});
