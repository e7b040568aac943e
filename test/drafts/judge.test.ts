import assert from 'node:assert/strict';
import { coreBody, fleschReadingEase, judgeDraft, type JudgeInput } from '../../src/modules/drafts/judge.ts';
import { GOOD_REPLY } from './samples.ts';

const GOOD_INPUT: JudgeInput = {
  bodyText: GOOD_REPLY,
  contactName: 'Dana Reyes',
  company: 'Globex Inc.',
  lastProspectMessage: 'Hi Alex, what does SSO cost, and how long does onboarding take? We want to plan a rollout in Q3.\n\nOn Mon, Mar 4, 2024 at 9:00 AM Alex <alex@acme.com> wrote:\n> Hi Dana',
  allowedDomains: ['acme.com', 'globex.com'],
};

const round3 = (x: number) => Math.round(x * 1000) / 1000;

describe('drafts: Flesch reading ease', () => {
  it('"The cat sat on the mat." is about 116', () => {
    const fre = fleschReadingEase('The cat sat on the mat.')!;
    assert.ok(Math.abs(fre - 116.1) < 0.1, String(fre));
    assert.equal(judgeDraft({ bodyText: 'The cat sat on the mat.', allowedDomains: [] }).scores.readability, 1);
  });

  it('is null without words', () => {
    assert.equal(fleschReadingEase(''), null);
    assert.equal(fleschReadingEase(' ... !? — '), null);
  });

  it('is very low for long polysyllabic sentences', () => {
    const fre = fleschReadingEase('Organizational interoperability necessitates comprehensive infrastructural standardization considerations.')!;
    assert.ok(fre < 0, String(fre));
  });

  it('does not split sentences at "e.g.", "U.S.", "Mr." or decimal numbers', () => {
    const { details } = judgeDraft({
      bodyText: 'We work with teams in the U.S. and Canada, e.g. Acme and Globex. Mr. Smith agreed it costs 5.99 a seat.',
      allowedDomains: [],
    });
    assert.equal(details.sentences, 2);
    assert.equal(details.words, 21);
  });

  it('counts line ends as sentence ends (lists), but not a line ending with a comma', () => {
    assert.equal(judgeDraft({ bodyText: 'What you get\n- single sign-on\n- audit logs', allowedDomains: [] }).details.sentences, 3);
    assert.equal(judgeDraft({ bodyText: 'When you are ready,\nsend me a note.', allowedDomains: [] }).details.sentences, 1);
  });
});

describe('drafts: coreBody', () => {
  const body = 'The plan is ready. See https://acme.com/x now.';
  const greetings = ['Hi Dana,', 'Hello', 'Hey Dana!', 'Dear Dr. Reyes,', 'Olá Dana,', 'Hola Dana,', 'Bonjour Dana,', 'Hallo Dana,', 'Ciao Dana,', 'Good morning Dana,'];
  const signOffs = ['Best,', 'Thanks,', 'Regards', 'Cheers', 'Kind regards,', 'Obrigado', 'Saludos,', 'Cordialement,', 'Viele Grüße', 'Best regards,', 'Thanks, Alex'];

  for (const greeting of greetings) {
    it(`drops the greeting "${greeting}"`, () => {
      assert.equal(coreBody(`${greeting}\n\n${body}`), 'The plan is ready. See now.');
    });
  }
  for (const signOff of signOffs) {
    it(`drops the sign-off "${signOff}" and everything after it`, () => {
      assert.equal(coreBody(`${body}\n\n${signOff}\nAlex Kim\nHead of Sales, Acme\n+1 555 0100`), 'The plan is ready. See now.');
    });
  }

  it('keeps the sentence after a greeting on the same line', () => {
    assert.equal(coreBody('Hi Dana, thanks for the note.\n\nBest,\nAlex'), 'thanks for the note.');
  });

  it('drops a sign-off right after the greeting when only a signature follows', () => {
    assert.equal(coreBody('Hi Dana,\n\nBest,\nAlex Kim\nAcme'), '');
  });

  it('does not take content lines that start like a sign-off for one', () => {
    assert.equal(coreBody('Hi Dana,\nThanks!\nHere is the deck.\n\nBest,\nAlex'), 'Thanks!\nHere is the deck.');
    const text = 'Thanks for asking, the plan is ready.\nThanks for everything!\nBest of all, it is free for a month.';
    assert.equal(coreBody(text), text);
  });

  it('cuts at a "-- " signature separator', () => {
    assert.equal(coreBody('Sure, Thursday works.\n-- \nAlex Kim'), 'Sure, Thursday works.');
  });
});

describe('drafts: personalization', () => {
  const score = (input: Partial<JudgeInput>) =>
    judgeDraft({ bodyText: 'Hi Dana, the Globex rollout can start in May.', allowedDomains: [], ...input });

  it('name 0.4, company 0.3, echo 0.3 (2+ echoed words)', () => {
    const r = score({ contactName: 'Dana Reyes', company: 'Globex', lastProspectMessage: 'When could the rollout begin? May?' });
    assert.equal(r.scores.personalization, 0.85); // 0.4 + 0.3 + 0.15: one echoed word ("rollout"; "may" is too short)
    assert.deepEqual(r.details.echoedWords, ['rollout']);
    const full = score({ contactName: 'Dana Reyes', company: 'Globex', lastProspectMessage: 'Can the rollout start in spring? Globex needs it.', bodyText: 'Hi Dana, the Globex rollout can start this spring.' });
    assert.deepEqual(full.details.echoedWords, ['rollout', 'start', 'spring']);
    assert.equal(full.scores.personalization, 1);
  });

  it('renormalises over the components whose input is present', () => {
    assert.equal(score({ contactName: 'Dana Reyes' }).scores.personalization, 1);
    assert.equal(score({ contactName: 'Mia Wong' }).scores.personalization, 0);
    assert.equal(score({ contactName: 'Dana Reyes', company: 'Initech' }).scores.personalization, round3(0.4 / 0.7));
    assert.equal(score({ company: 'Initech', lastProspectMessage: 'What about the rollout timeline?' }).scores.personalization, 0.25);
  });

  it('is 0.5 when no component has input', () => {
    assert.equal(score({}).scores.personalization, 0.5);
    assert.equal(score({ contactName: '  ', company: '', lastProspectMessage: '\n' }).scores.personalization, 0.5);
  });

  it('uses the first name, skips titles and email-address names, is case- and accent-insensitive', () => {
    assert.equal(score({ contactName: 'Dr. Dana Reyes' }).details.nameUsed, true);
    assert.equal(score({ contactName: 'DANA' }).details.nameUsed, true);
    assert.equal(score({ contactName: 'José Ruiz', bodyText: 'Hola Jose, gracias.' }).details.nameUsed, true);
    assert.equal(score({ contactName: 'Dan Reyes' }).details.nameUsed, false, 'whole words only');
    assert.equal(score({ contactName: 'dana@globex.com' }).scores.personalization, 0.5);
  });

  it('does not count a name or company that only appears in a URL or an address', () => {
    const r = score({ contactName: 'Dana', company: 'Globex', bodyText: 'Write to dana@globex.com or see https://globex.com/dana' });
    assert.equal(r.details.nameUsed, false);
    assert.equal(r.details.companyUsed, false);
  });

  it('matches the company without its legal form', () => {
    assert.equal(score({ company: 'Globex Corporation' }).details.companyUsed, true);
    assert.equal(score({ company: 'Globex, Inc.' }).details.companyUsed, true);
    assert.equal(score({ company: 'Globex GmbH & Co. KG' }).details.companyUsed, true);
    assert.equal(score({ company: 'Globex Labs' }).details.companyUsed, false, 'the whole name is looked for');
  });

  it('echoes only content words of 4+ letters that are not stopwords, outside quoted history', () => {
    const r = score({
      bodyText: 'Thanks for your email. Would this work for you? The API limits are generous.',
      lastProspectMessage: 'Thanks for your email, would this work? What are the API limits?\n\n> the generous plan',
    });
    assert.deepEqual(r.details.echoedWords, ['limits']);
    assert.equal(r.scores.personalization, 0.5);
  });
});

describe('drafts: link quality', () => {
  const quality = (bodyText: string) => judgeDraft({ bodyText, allowedDomains: ['acme.com'] });

  it('is 1 without links and with good links', () => {
    assert.equal(quality('No links here.').scores.linkQuality, 1);
    assert.equal(quality('See https://acme.com/pricing and https://docs.acme.com/sso.').scores.linkQuality, 1);
    assert.equal(quality('See www.acme.com/pricing.').scores.linkQuality, 1);
  });

  it('counts http, shortener, IP, punycode and unknown domains as bad, with the first reason', () => {
    const r = quality('a http://acme.com/x b https://bit.ly/x');
    assert.equal(r.scores.linkQuality, 0);
    assert.deepEqual(r.details.badLinks, [
      { url: 'http://acme.com/x', reason: 'http' },
      { url: 'https://bit.ly/x', reason: 'shortener' },
    ]);
    assert.deepEqual(quality('https://10.0.0.1/a').details.badLinks, [{ url: 'https://10.0.0.1/a', reason: 'ip' }]);
    assert.deepEqual(quality('https://xn--80ak6aa92e.com/').details.badLinks, [{ url: 'https://xn--80ak6aa92e.com/', reason: 'punycode' }]);
    assert.deepEqual(quality('evil.example.com/x').details.badLinks, [{ url: 'evil.example.com/x', reason: 'unknown_domain' }]);
  });

  it('is the share of good links, halved above two links', () => {
    assert.equal(quality('https://acme.com/a https://evil.example/b').scores.linkQuality, 0.5);
    assert.equal(quality('https://acme.com/a https://acme.com/b https://acme.com/c').scores.linkQuality, 0.5);
    assert.equal(quality('https://acme.com/a https://acme.com/b https://acme.com/c https://bit.ly/d').scores.linkQuality, 0.375);
  });
});

describe('drafts: overall score', () => {
  it('a realistic good reply scores at least 0.6', () => {
    const { scores, details } = judgeDraft(GOOD_INPUT);
    assert.ok(scores.overall >= 0.6, JSON.stringify({ scores, details }));
    assert.equal(details.nameUsed, true);
    assert.equal(details.companyUsed, true);
    assert.ok(details.echoedWords.includes('onboarding'));
    assert.equal(scores.linkQuality, 1);
  });

  it('a generic, jargon-heavy reply with a bad link scores below 0.6', () => {
    const { scores } = judgeDraft({
      ...GOOD_INPUT,
      bodyText:
        'Hello,\n\nOur comprehensive enterprise-grade authentication infrastructure facilitates organizational interoperability, ' +
        'operational standardization and multidimensional scalability considerations. Documentation: http://bit.ly/abc\n\nRegards',
    });
    assert.ok(scores.overall < 0.6, JSON.stringify(scores));
  });

  it('is 0.4·readability + 0.35·personalization + 0.25·linkQuality of the rounded parts, all in 0..1 with 3 decimals', () => {
    const bodies = [GOOD_REPLY, '', 'x', 'Hi Dana,\n\nBest,\nAlex', 'http://1.2.3.4 '.repeat(5), 'Antidisestablishmentarianism. '.repeat(3)];
    for (const bodyText of bodies) {
      const { scores } = judgeDraft({ ...GOOD_INPUT, bodyText });
      for (const value of Object.values(scores)) {
        assert.ok(value >= 0 && value <= 1, `${value} for ${JSON.stringify(bodyText)}`);
        assert.equal(value, round3(value));
      }
      assert.equal(scores.overall, round3(0.4 * scores.readability + 0.35 * scores.personalization + 0.25 * scores.linkQuality));
    }
  });

  it('readability is linear between FRE 20 and 70, and 0 without words', () => {
    const { scores, details } = judgeDraft({ bodyText: GOOD_REPLY, allowedDomains: [] });
    const fre = fleschReadingEase(coreBody(GOOD_REPLY))!;
    assert.equal(details.fleschReadingEase, Math.round(fre * 10) / 10);
    assert.equal(scores.readability, round3(Math.min(1, Math.max(0, (fre - 20) / 50))));
    const mid = 'Quarterly onboarding documentation clarifies administrative responsibilities for everyone involved.';
    const midFre = fleschReadingEase(mid)!;
    assert.equal(judgeDraft({ bodyText: mid, allowedDomains: [] }).scores.readability, round3(Math.min(1, Math.max(0, (midFre - 20) / 50))));
    assert.equal(judgeDraft({ bodyText: 'Hi Dana,\n\nBest,\nAlex', allowedDomains: [] }).scores.readability, 0);
  });

  it('is deterministic', () => {
    assert.deepEqual(judgeDraft(GOOD_INPUT), judgeDraft(GOOD_INPUT));
  });
});

describe('judge: readability in the draft’s language', () => {
  it('uses the language’s adaptation of Flesch', () => {
    // 2 sentences, 8 words, all of one syllable: the formulas differ only by their constants.
    const text = 'Dog sat. Cat ran far and got wet.';
    assert.equal(fleschReadingEase(text, 'en')!.toFixed(3), (206.835 - 1.015 * 4 - 84.6).toFixed(3));
    assert.equal(fleschReadingEase(text, 'pt')!.toFixed(3), (248.835 - 1.015 * 4 - 84.6).toFixed(3));
    assert.equal(fleschReadingEase(text, 'es')!.toFixed(3), (206.84 - 1.02 * 4 - 60).toFixed(3));
    assert.equal(fleschReadingEase(text, 'fr')!.toFixed(3), (207 - 1.015 * 4 - 73.6).toFixed(3));
    assert.equal(fleschReadingEase(text, 'de')!.toFixed(3), (180 - 4 - 58.5).toFixed(3));
  });
  it('an ordinary Portuguese reply reads far easier on the Portuguese scale than on the English one', () => {
    const body = 'Olá João,\n\nObrigado pela resposta. Uma conversa de vinte minutos na próxima semana funciona? Você pode escolher um horário aqui.\n\nAbraços,\nSam';
    const asEn = judgeDraft({ bodyText: body, allowedDomains: [] }).scores.readability;
    const asPt = judgeDraft({ bodyText: body, allowedDomains: [], language: 'pt' }).scores.readability;
    assert.ok(asPt > asEn + 0.3, `${asPt} > ${asEn} + 0.3`);
  });
});
