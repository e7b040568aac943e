import { Migration } from '@mikro-orm/migrations';

/**
 * An operator's correction of a reply's classification (`PATCH /v1/replies/:replyId`,
 * inbound/reclassify.ts; docs/decisions.md "Correcting a reply's classification"): the reply's
 * `classification` is the one in force (every reader keeps reading it), and the classifier's
 * own decision is kept beside it. `classifier_classification` is set by the first change (null:
 * never changed, the classifier's is `classification`); `decided_by` and `confidence` stay the
 * classifier's. `reclassified_at` and `reclassified_by` (`key:<id>`, `dashboard:<key id>`,
 * `cli`) say who made the last change, and when. New nullable columns without a default: no
 * table rewrite.
 */
export class Migration0032ReplyReclassification extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table replies add column classifier_classification text,
                                     add column reclassified_at timestamptz,
                                     add column reclassified_by text`);
  }
}
