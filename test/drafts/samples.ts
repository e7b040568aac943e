/** A good, sendable reply the judge and guardrail tests start from; each test changes one thing. */
export const GOOD_REPLY = [
  'Hi Dana,',
  '',
  'Thanks for asking about SSO pricing at Globex. SSO is part of our Business plan, and most teams finish onboarding in about two weeks.',
  '',
  'You can see the plan details here: https://acme.com/pricing',
  '',
  'Would a short call on Thursday work to plan your rollout?',
  '',
  'Best,',
  'Alex Kim',
  'Acme',
].join('\n');
