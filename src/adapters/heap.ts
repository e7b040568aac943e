import v8 from 'node:v8';

/**
 * How far V8 lets the old generation grow past what the last full collection left live before
 * it collects again, in percent. V8's own factor goes up to 4x when collections are fast: a
 * worker sending 10,000 messages promoted each claimed batch it held across two scavenges and
 * reached 240-249 MB of peak RSS before its first full collection (the target is < 250 MB),
 * from 174 MB at rest. At 50 (1.5x) its peak is 182-188 MB with no measurable cost in sending
 * or webhook throughput (docs/decisions.md, "The daemon's old generation grows by half").
 */
export const HEAP_GROWING_PERCENT = 50;

const FLAG = '--heap-growing-percent';
/** The flag as node takes it on its command line: V8 reads `-` and `_` alike. */
const GIVEN = /^--heap[-_]growing[-_]percent(=|$)/;

/**
 * Applies HEAP_GROWING_PERCENT to this process (the daemon's, `mailgate serve`), unless node
 * was started with its own --heap-growing-percent: the operator's choice stands. V8 reads the
 * flag whenever it sets the next collection's limit, so setting it at run time takes effect.
 * Returns the value in effect, or null when the operator's flag was left alone.
 */
export function applyHeapPolicy(execArgv: readonly string[] = process.execArgv): number | null {
  if (execArgv.some((a) => GIVEN.test(a))) return null;
  v8.setFlagsFromString(`${FLAG}=${HEAP_GROWING_PERCENT}`);
  return HEAP_GROWING_PERCENT;
}
