// What a benchmark run measured, as one machine-readable line beside its report, so that
// bench/series.ts can run it several times and take medians without reading prose. Kept free
// of the app's imports: the series runner loads only this.

/** The prefix of a result line on a benchmark's stdout. */
export const RESULT_PREFIX = 'BENCH_RESULT ';

/** The figures of one run of one benchmark (the numbers issue 20's table is judged on). */
export type BenchResult = Record<string, number | null>;

/** Prints a run's figures for bench/series.ts (one line; a benchmark may print several, one per `name`). */
export function benchResult(name: string, figures: BenchResult): void {
  console.log(RESULT_PREFIX + JSON.stringify({ name, ...figures }));
}

/** The result lines of a run's output, by name (a later line of the same name wins). */
export function parseResults(stdout: string): Map<string, BenchResult> {
  const out = new Map<string, BenchResult>();
  for (const line of stdout.split('\n')) {
    if (!line.startsWith(RESULT_PREFIX)) continue;
    const { name, ...figures } = JSON.parse(line.slice(RESULT_PREFIX.length)) as { name: string } & BenchResult;
    out.set(name, figures);
  }
  return out;
}

export function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

/** The middle value; with an even count, the mean of the two middle ones. */
export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
