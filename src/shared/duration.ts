// Durations are written 250ms, 30s, 5m, 2h, 1d (contract §1); a number (in a config file) means
// milliseconds, and zero needs no unit in a string either ("0", as the settings that take 0 say).
const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(value: string | number): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) throw new Error('must be a non-negative duration');
    return value;
  }
  if (/^\s*0+(?:\.0+)?\s*$/.test(value)) return 0;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(value);
  if (!m) throw new Error(`"${value}" is not a duration like 250ms, 30s, 5m, 2h or 1d`);
  return Math.round(Number(m[1]) * UNITS[m[2]]);
}

export function parseDurationList(value: string): number[] {
  return value.split(',').map((p) => parseDuration(p.trim()));
}

/** The largest unit that divides ms exactly, e.g. 259200000 -> "3d", 5400000 -> "90m". */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) if (ms >= UNITS[unit] && ms % UNITS[unit] === 0) return `${ms / UNITS[unit]}${unit}`;
  return `${ms}ms`;
}
