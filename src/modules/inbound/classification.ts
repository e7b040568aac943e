// What the reply classifier (classifier.ts) and its model (model.ts) take and decide.

export type Classification = 'interested' | 'not_interested' | 'out_of_office' | 'unsubscribe' | 'bounce';
/** What a reply classifier decides; bounces are recognized before, from the report itself. */
export type ReplyClassification = Exclude<Classification, 'bounce'>;

export type MailHeaders = Map<string, unknown> | Record<string, string>;

export interface ClassifierInput {
  subject: string;
  /** The reply's own text: quoted history and signature already stripped. */
  text: string;
  headers: MailHeaders;
}
