import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { InboundAnalysis } from '../modules/inbound/analyze.ts';
import { jsonOption, type CliContext } from './context.ts';

/** One line of `mailgate classify` (contract §2). */
export interface ClassifyRecord {
  file: string;
  /**
   * "ignored": delayed-delivery and success DSNs, read receipts: mail the daemon drops.
   * "complaint": a feedback-loop report (classification unsubscribe). "unclassified": automatic
   * mail that is neither, recorded without effects (docs/classification.md).
   */
  kind: InboundAnalysis['kind'];
  /** null for ignored and unclassified mail: neither a reply nor a bounce. */
  classification: InboundAnalysis['classification'] | null;
  bounceType?: 'hard' | 'soft';
  bounceStatus?: string | null;
  bounceReason?: string;
  originalMessageId?: string | null;
  decidedBy: string;
  confidence: number;
  snippet: string;
}

export function toRecord(file: string, a: InboundAnalysis): ClassifyRecord {
  const record: ClassifyRecord = { file, kind: a.kind, classification: a.kind === 'ignored' || a.kind === 'unclassified' ? null : a.classification, decidedBy: a.decidedBy, confidence: a.confidence, snippet: a.snippet };
  if (a.bounce) {
    record.bounceType = a.bounce.type;
    record.bounceStatus = a.bounce.status;
    record.bounceReason = a.bounce.reason;
    record.originalMessageId = a.bounce.originalMessageId;
  }
  return record;
}

function human(r: ClassifyRecord, a: InboundAnalysis): string {
  const head = r.kind === 'bounce' ? `bounce ${r.bounceType}${r.bounceStatus ? ` ${r.bounceStatus}` : ''}` : r.kind === 'ignored' || r.kind === 'unclassified' ? r.kind : r.kind === 'complaint' ? 'complaint (unsubscribe)' : `reply ${r.classification}`;
  const lines = [`${r.file}: ${head} (${r.decidedBy}, confidence ${r.confidence})`];
  if (r.kind === 'bounce') {
    lines.push(`  original: ${r.originalMessageId ?? '(not found)'}`, `  reason: ${r.bounceReason}`);
  } else {
    lines.push(`  ${r.kind === 'reply' ? 'snippet' : 'why'}: ${r.snippet}`);
    if (a.oooReturnDate) lines.push(`  back: ${a.oooReturnDate.toISOString().slice(0, 10)}`);
  }
  return lines.join('\n');
}

export function registerClassifyCommands(program: Command, ctx: CliContext) {
  jsonOption(
    program
      .command('classify')
      .description('parse and classify .eml files exactly as the daemon does (no database)')
      .argument('<files...>', '.eml files'),
  ).action(async (files: string[], opts: { json?: boolean }) => {
    // Every file is read and analyzed before anything is printed, so an error leaves stdout empty.
    const results: Array<{ record: ClassifyRecord; analysis: InboundAnalysis }> = [];
    for (const file of files) {
      let raw: Buffer;
      try {
        raw = await readFile(file);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        throw new Error(`${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : (err as Error).message}`);
      }
      if (!/^[\x21-\x39\x3b-\x7e]+[ \t]*:/m.test(raw.subarray(0, 4096).toString('latin1').split(/\r?\n\r?\n/)[0] ?? '')) {
        throw new Error(`${file}: not an email message (no header fields)`);
      }
      const { analyzeMessage } = await import('../modules/inbound/analyze.ts');
      const analysis = await analyzeMessage(raw);
      results.push({ record: toRecord(file, analysis), analysis });
    }
    ctx.print(
      opts,
      results.map((r) => r.record),
      results.map((r) => human(r.record, r.analysis)).join('\n'),
    );
  });
}
