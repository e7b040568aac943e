// What the reply classifier (classifier.ts) and its model (model.ts) take and decide.

export type Classification = 'interested' | 'not_interested' | 'out_of_office' | 'unsubscribe' | 'bounce';

/** What a reply may be listed as (GET /v1/replies' `classification`). */
export const REPLY_CLASSIFICATIONS = ['interested', 'not_interested', 'out_of_office', 'bounce', 'unsubscribe'] as const;
/** What an operator may make a reply (PATCH /v1/replies/:replyId): a person's answer or an out-of-office, never a mail system's bounce. */
export const OPERATOR_CLASSIFICATIONS = ['interested', 'not_interested', 'out_of_office', 'unsubscribe'] as const;
/** What a reply classifier decides; bounces are recognized before, from the report itself. */
export type ReplyClassification = Exclude<Classification, 'bounce'>;

export type MailHeaders = Map<string, unknown> | Record<string, string>;

export interface ClassifierInput {
  subject: string;
  /** The reply's own text: quoted history and signature already stripped. */
  text: string;
  headers: MailHeaders;
}
