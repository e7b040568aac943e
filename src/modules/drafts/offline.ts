// The offline composer: drafts written from the planner's context with fixed, reviewed phrases
// when no LLM is configured (or the LLM failed). It answers each ask from the knowledge base,
// never invents a fact (an ask the knowledge base does not cover gets a promise to follow up),
// and takes links only from the knowledge base and the SDR's profile. Five languages.
import type { DraftContext } from './planner.ts';
import type { Ask, AskKind, Language, Objection } from './asks.ts';
import type { KbHit } from './kb.ts';
import { detectLanguage, sentences } from './asks.ts';
import { searchTerms } from './kb.ts';

export type Style = 'direct_answer' | 'question_led' | 'proof_led';

interface Phrases {
  greet(name: string | null, formal: boolean): string;
  thanks: string;
  thanksTopic(topic: string): string;
  topic: Record<Exclude<AskKind, 'meeting'>, string>;
  answerFromKb(topic: string, text: string): string;
  followUp(topic: string): string;
  question(company: string | null): string;
  proofIntro: string;
  ctaCalendar(company: string | null, url: string): string;
  cta(company: string | null): string;
  signOff(formal: boolean): string;
  objection: Record<Objection, string>;
  softCta: Record<Objection, string>;
}

const fit = (company: string | null, en: string, other: string) => (company ? en : other);

const PHRASES: Record<Language, Phrases> = {
  en: {
    greet: (n, formal) => (formal ? `Dear ${n ?? 'there'},` : n ? `Hi ${n},` : 'Hi there,'),
    thanks: 'Thanks for getting back to me.',
    thanksTopic: (t) => `Thanks for getting back to me about ${t}.`,
    topic: { pricing: 'pricing', security: 'security', integration: 'integrations', timing: 'timing', information: 'more details', question: 'your question' },
    answerFromKb: (t, x) => `On ${t}: ${x}`,
    followUp: (t) => `On ${t}: I will confirm the exact details for your case and send them over.`,
    question: (c) => `Before I go into detail, what would ${c ?? 'your team'} most want to solve first?`,
    proofIntro: 'A quick example of what this looks like in practice:',
    ctaCalendar: (c, url) => `Would a 20-minute call next week work${fit(c, ` to see how this fits ${c}`, '')}? You can pick a time here: ${url}`,
    cta: (c) => `Would a 20-minute call next week work${fit(c, ` to see how this fits ${c}`, '')}? Let me know a time that suits you.`,
    objection: {
      budget: 'Understood on budget, and thanks for being upfront about it.',
      timing: 'Understood that the timing is not right at the moment.',
      competitor: 'Good to know you already have a solution in place.',
    },
    softCta: {
      budget: 'Would it help if I checked back when you plan next quarter’s budget?',
      timing: 'Would it be all right if I checked back in a couple of months?',
      competitor: 'If a short comparison with your current setup would ever be useful, I am happy to put one together.',
    },
    signOff: (formal) => (formal ? 'Kind regards,' : 'Best,'),
  },
  es: {
    greet: (n) => (n ? `Hola ${n},` : 'Hola,'),
    thanks: 'Gracias por tu respuesta.',
    thanksTopic: (t) => `Gracias por tu pregunta sobre ${t}.`,
    topic: { pricing: 'precios', security: 'seguridad', integration: 'integraciones', timing: 'plazos', information: 'más detalles', question: 'tu pregunta' },
    answerFromKb: (t, x) => `Sobre ${t}: ${x}`,
    followUp: (t) => `Sobre ${t}: confirmo los detalles exactos para tu caso y te los envío.`,
    question: (c) => `Antes de entrar en detalle, ¿qué le gustaría resolver primero a ${c ?? 'tu equipo'}?`,
    proofIntro: 'Un ejemplo rápido de cómo funciona en la práctica:',
    ctaCalendar: (c, url) => `¿Te va bien una llamada de 20 minutos la próxima semana${fit(c, ` para ver cómo encaja en ${c}`, '')}? Puedes elegir un horario aquí: ${url}`,
    cta: (c) => `¿Te va bien una llamada de 20 minutos la próxima semana${fit(c, ` para ver cómo encaja en ${c}`, '')}? Dime qué horario te viene mejor.`,
    objection: {
      budget: 'Entendido lo del presupuesto, gracias por decírmelo.',
      timing: 'Entiendo que ahora no es el momento.',
      competitor: 'Bien saber que ya tienen una solución.',
    },
    softCta: {
      budget: '¿Te parece si vuelvo a escribirte cuando planifiquen el próximo presupuesto?',
      timing: '¿Te parece bien si te escribo de nuevo en un par de meses?',
      competitor: 'Si en algún momento te sirve una comparación breve con lo que usan hoy, te la preparo.',
    },
    signOff: () => 'Saludos,',
  },
  pt: {
    greet: (n) => (n ? `Olá ${n},` : 'Olá,'),
    thanks: 'Obrigado pela resposta.',
    thanksTopic: (t) => `Obrigado pela pergunta sobre ${t}.`,
    topic: { pricing: 'preços', security: 'segurança', integration: 'integrações', timing: 'prazos', information: 'mais detalhes', question: 'sua pergunta' },
    answerFromKb: (t, x) => `Sobre ${t}: ${x}`,
    followUp: (t) => `Sobre ${t}: vou confirmar os detalhes exatos para o seu caso e envio em seguida.`,
    question: (c) => `Antes de entrar em detalhes, o que ${c ? `a ${c}` : 'sua equipe'} gostaria de resolver primeiro?`,
    proofIntro: 'Um exemplo rápido de como isso funciona na prática:',
    ctaCalendar: (c, url) => `Uma conversa de 20 minutos na próxima semana funciona${fit(c, ` para ver como isso se encaixa na ${c}`, '')}? Você pode escolher um horário aqui: ${url}`,
    cta: (c) => `Uma conversa de 20 minutos na próxima semana funciona${fit(c, ` para ver como isso se encaixa na ${c}`, '')}? Me diga o melhor horário para você.`,
    objection: {
      budget: 'Entendido sobre o orçamento, obrigado pela transparência.',
      timing: 'Entendo que agora não é o momento.',
      competitor: 'Bom saber que vocês já têm uma solução.',
    },
    softCta: {
      budget: 'Posso voltar a falar quando vocês planejarem o orçamento do próximo trimestre?',
      timing: 'Tudo bem se eu voltar a escrever em alguns meses?',
      competitor: 'Se uma comparação rápida com a solução atual for útil, posso preparar uma.',
    },
    signOff: () => 'Abraços,',
  },
  fr: {
    greet: (n) => (n ? `Bonjour ${n},` : 'Bonjour,'),
    thanks: 'Merci pour votre réponse.',
    thanksTopic: (t) => `Merci pour votre question sur ${t}.`,
    topic: { pricing: 'les tarifs', security: 'la sécurité', integration: 'les intégrations', timing: 'le calendrier', information: 'plus de détails', question: 'votre question' },
    answerFromKb: (t, x) => `Concernant ${t} : ${x}`,
    followUp: (t) => `Concernant ${t} : je confirme les détails exacts pour votre cas et je vous les envoie.`,
    question: (c) => `Avant d'entrer dans le détail, que souhaiterait résoudre ${c ?? 'votre équipe'} en priorité ?`,
    proofIntro: 'Un exemple concret :',
    ctaCalendar: (c, url) => `Un appel de 20 minutes la semaine prochaine vous conviendrait-il${fit(c, ` pour voir comment cela s'adapte à ${c}`, '')} ? Vous pouvez choisir un créneau ici : ${url}`,
    cta: (c) => `Un appel de 20 minutes la semaine prochaine vous conviendrait-il${fit(c, ` pour voir comment cela s'adapte à ${c}`, '')} ? Dites-moi le créneau qui vous arrange.`,
    objection: {
      budget: 'Bien compris pour le budget, merci de votre franchise.',
      timing: 'Je comprends que ce n’est pas le bon moment.',
      competitor: 'Bon à savoir que vous avez déjà une solution en place.',
    },
    softCta: {
      budget: 'Puis-je revenir vers vous lors de la préparation du prochain budget ?',
      timing: 'Puis-je revenir vers vous dans quelques mois ?',
      competitor: 'Si une courte comparaison avec votre solution actuelle peut vous être utile, je peux la préparer.',
    },
    signOff: () => 'Cordialement,',
  },
  de: {
    greet: (n) => (n ? `Hallo ${n},` : 'Hallo,'),
    thanks: 'Danke für Ihre Antwort.',
    thanksTopic: (t) => `Danke für Ihre Frage zu ${t}.`,
    topic: { pricing: 'den Preisen', security: 'Sicherheit', integration: 'Integrationen', timing: 'dem Zeitplan', information: 'weiteren Details', question: 'Ihrer Frage' },
    answerFromKb: (t, x) => `Zu ${t}: ${x}`,
    followUp: (t) => `Zu ${t}: Ich kläre die genauen Details für Ihren Fall und schicke sie Ihnen.`,
    question: (c) => `Bevor ich ins Detail gehe: Was möchte ${c ?? 'Ihr Team'} als Erstes lösen?`,
    proofIntro: 'Ein kurzes Beispiel aus der Praxis:',
    ctaCalendar: (c, url) => `Passt Ihnen nächste Woche ein Gespräch von 20 Minuten${fit(c, `, um zu sehen, wie das zu ${c} passt`, '')}? Hier können Sie einen Termin wählen: ${url}`,
    cta: (c) => `Passt Ihnen nächste Woche ein Gespräch von 20 Minuten${fit(c, `, um zu sehen, wie das zu ${c} passt`, '')}? Sagen Sie mir gern, wann es Ihnen passt.`,
    objection: {
      budget: 'Verstanden, danke für die offene Antwort zum Budget.',
      timing: 'Verstanden, dass es gerade nicht der richtige Zeitpunkt ist.',
      competitor: 'Gut zu wissen, dass Sie bereits eine Lösung haben.',
    },
    softCta: {
      budget: 'Darf ich mich melden, wenn Sie das Budget für das nächste Quartal planen?',
      timing: 'Darf ich mich in ein paar Monaten wieder melden?',
      competitor: 'Falls ein kurzer Vergleich mit Ihrer aktuellen Lösung einmal hilfreich ist, bereite ich gern einen vor.',
    },
    signOff: () => 'Viele Grüße,',
  },
};

/** The first one or two sentences of a knowledge-base entry (at most ~300 characters). */
function excerpt(body: string): string {
  const parts = sentences(body.replace(/\s*\n\s*/g, ' '));
  let out = parts[0] ?? '';
  if (parts[1] && out.length + parts[1].length < 300) out += ' ' + parts[1];
  return out.length > 320 ? out.slice(0, 317).replace(/\s+\S*$/, '') + '…' : out;
}

// Word roots that mark an entry as being about an ask's kind, in the five languages.
const KIND_ROOTS: Record<AskKind, string[]> = {
  pricing: ['pric', 'cost', 'plan', 'seat', 'discount', 'prec', 'preç', 'cust', 'tarif', 'prix', 'preis', 'kost', 'licen', 'lizenz'],
  meeting: ['call', 'meet', 'demo', 'calendar', 'reuni', 'appel', 'termin'],
  security: ['secur', 'soc', 'gdpr', 'compli', 'encrypt', 'sso', 'segur', 'sécur', 'sicher', 'datenschutz'],
  integration: ['integr', 'api', 'salesforce', 'hubspot', 'crm', 'webhook', 'sync', 'schnittstelle'],
  timing: ['onboard', 'rollout', 'implement', 'week', 'timeline', 'semana', 'semaine', 'woche'],
  information: ['case', 'customer', 'overview', 'docs', 'cliente', 'kunde'],
  question: [],
};

/** Equal, or one a prefix of the other with at least 5 letters in common (precio / precios). */
function sameTerm(a: string, b: string): boolean {
  return a === b || (Math.min(a.length, b.length) >= 5 && (a.startsWith(b) || b.startsWith(a)));
}

/**
 * The knowledge entry that best answers the ask: terms it shares with the ask, one point when
 * it is about the ask's kind, two when it is written in the reply's language (one off when in
 * another). A plain question needs two shared terms.
 */
function bestEntry(ask: Ask, knowledge: KbHit[], used: Set<string>, language: Language): KbHit | null {
  const terms = searchTerms(`${ask.text} ${ask.keyword ?? ''}`);
  let best: KbHit | null = null;
  let bestScore = 0;
  for (const k of knowledge) {
    if (used.has(k.id)) continue;
    const kt = searchTerms(`${k.title} ${k.body}`, 400);
    const shared = terms.filter((t) => kt.some((u) => sameTerm(t, u))).length;
    const aboutKind = kt.some((u) => KIND_ROOTS[ask.kind].some((r) => u.startsWith(r)));
    if (ask.kind === 'question' ? shared < 2 : shared === 0 && !aboutKind) continue;
    let score = shared + (aboutKind ? 1 : 0);
    const lang = detectLanguage(`${k.title} ${k.body}`);
    if (lang) score += lang === language ? 2 : -1;
    if (score > bestScore) {
      best = k;
      bestScore = score;
    }
  }
  return best;
}

const PROOF = /\b(case stud(y|ies)|customers?|clients?|results?|reduced|increased|saved|grew|cliente|clientes|caso|kunden|r[ée]sultats?)\b/iu;

export interface OfflineDraft {
  bodyText: string;
  rationale: string;
}

/** Deterministic knobs the offline composer can honour from the SDR's instructions. */
function knobs(instructions: string | null) {
  const i = (instructions ?? '').toLowerCase();
  return {
    short: /\b(short|shorter|brief|concise|kurz|breve|court)\b/.test(i),
    noLink: /\b(no|without|don'?t (include|add)) (a |the )?(calendar |booking )?(link|calendar)/.test(i),
    formal: /\bformal\b/.test(i),
    noCall: /\b(no|without|don'?t (propose|suggest|ask for)) (a )?(call|meeting)/.test(i),
  };
}

export function composeOffline(ctx: DraftContext, style: Style, instructions: string | null): OfflineDraft {
  const p = PHRASES[ctx.language];
  const k = knobs(instructions);
  const company = ctx.contact.company;
  const lines: string[] = [p.greet(ctx.contact.firstName, k.formal && ctx.language === 'en'), ''];
  const notes: string[] = [];

  const answerable = ctx.asks.filter((a) => a.kind !== 'meeting');
  const firstTopic = answerable[0];
  const thanks = firstTopic ? p.thanksTopic(p.topic[firstTopic.kind as keyof Phrases['topic']]) : p.thanks;
  // An objection is acknowledged first; the call is then offered softly, not pushed.
  const opener = ctx.objection ? `${thanks} ${p.objection[ctx.objection]}` : thanks;
  if (ctx.objection) notes.push(`acknowledged the ${ctx.objection} objection`);

  const used = new Set<string>();
  const answers: string[] = [];
  for (const ask of k.short ? answerable.slice(0, 1) : answerable) {
    const topic = p.topic[ask.kind as keyof Phrases['topic']];
    const entry = bestEntry(ask, ctx.knowledge, used, ctx.language);
    if (entry) {
      used.add(entry.id);
      answers.push(p.answerFromKb(topic, excerpt(entry.body)));
      notes.push(`answered ${ask.kind} from "${entry.title}"`);
    } else {
      answers.push(p.followUp(topic));
      notes.push(`no knowledge-base entry for ${ask.kind}: promised to follow up`);
    }
  }

  const body: string[] = [];
  if (style === 'question_led') {
    body.push(opener + ' ' + p.question(company));
    if (answers.length) body.push(answers.join('\n'));
  } else if (style === 'proof_led') {
    const proof = ctx.knowledge.find((e) => !used.has(e.id) && PROOF.test(`${e.title} ${e.body}`));
    body.push(opener);
    if (proof && !k.short) {
      body.push(`${p.proofIntro} ${excerpt(proof.body)}`);
      notes.push(`led with proof from "${proof.title}"`);
    } else notes.push('no case-study entry in the knowledge base to lead with');
    if (answers.length) body.push(answers.join('\n'));
  } else {
    body.push(opener);
    if (answers.length) body.push(answers.join('\n'));
  }

  if (ctx.objection && !ctx.asks.some((a) => a.kind === 'meeting')) {
    body.push(p.softCta[ctx.objection]);
  } else if (!k.noCall) {
    const url = !k.noLink && ctx.sdr.calendarUrl?.startsWith('https://') ? ctx.sdr.calendarUrl : null;
    body.push(url ? p.ctaCalendar(company, url) : p.cta(company));
    if (url) notes.push('offered the calendar link from the SDR profile');
  }
  lines.push(...body.flatMap((b) => [b, '']));
  lines.push(p.signOff(k.formal && ctx.language === 'en'), ctx.sdr.signature?.trim() || ctx.sdr.name);

  const applied = Object.entries(k).filter(([, v]) => v).map(([n]) => n);
  if (instructions) notes.push(applied.length ? `instructions applied as: ${applied.join(', ')}` : 'instructions need an LLM writer; the template could not apply them');
  return {
    bodyText: lines.join('\n'),
    rationale: `Offline template (${style.replace('_', '-')}, ${ctx.language}): ${notes.join('; ') || 'thanked and proposed a call'}.`,
  };
}
