import { isoOrNull } from '../../shared/time.ts';
import type { ReplyListRow } from './repository.ts';

/** A reply as the API shows it (GET /v1/replies, PATCH /v1/replies/:replyId, `mailgate reply update`). */
export function replyView(r: ReplyListRow, holders: Array<{ reply_id: string; sdr_id: string; name: string }>) {
  return {
    id: r.id,
    email: r.email,
    campaignId: r.campaign_id,
    classification: r.classification,
    receivedAt: isoOrNull(r.received_at)!,
    threadSnippet: r.thread_snippet,
    forwardedAt: isoOrNull(r.forwarded_at),
    assignedTo: holders.filter((h) => h.reply_id === r.id).map((h) => ({ sdrId: h.sdr_id, name: h.name })),
    classifierClassification: r.classifier_classification ?? r.classification,
    decidedBy: r.decided_by,
    reclassifiedAt: isoOrNull(r.reclassified_at),
    reclassifiedBy: r.reclassified_by,
  };
}
