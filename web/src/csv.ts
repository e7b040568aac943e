// RFC 4180 CSV: quoted fields with commas, quotes ("") and line breaks; CRLF or LF; a BOM. A
// table to import (parseTable) takes the separator of its header line: a comma, or the semicolon
// or tab European Excel writes (or an Excel `sep=;` first line).

/**
 * A file's bytes as text: UTF-8 (a BOM or not), UTF-16 with its BOM (Excel's "Unicode text"),
 * else Windows-1252, what Excel writes a "CSV" in on Western Windows (a superset of Latin-1):
 * read as UTF-8, its é and ü became U+FFFD and were stored so.
 */
export function decodeText(bytes: Uint8Array): string {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder('utf-16le').decode(bytes);
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder('utf-16be').decode(bytes);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return new TextDecoder('windows-1252').decode(bytes);
  }
}

/** The separator of the first line (outside quotes): the most frequent of , ; and tab; a comma on a tie. */
function sniff(text: string, from: number): string {
  const n: Record<string, number> = { ',': 0, ';': 0, '\t': 0 };
  let quoted = false;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (c === '"') quoted = !quoted;
    else if (!quoted && (c === '\n' || c === '\r')) break;
    else if (!quoted && c in n) n[c]++;
  }
  return n[';'] > n[','] && n[';'] >= n['\t'] ? ';' : n['\t'] > n[','] ? '\t' : ',';
}

/**
 * Every record of the file, empty lines included (as ['']), so that record k is the spreadsheet's
 * row k. `sniffed`: the separator is the header line's (else a comma).
 */
function records(text: string, sniffed: boolean): { rows: string[][]; separator: string } {
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  let sep = ',';
  const declared = sniffed ? /^sep=([,;\t|])\r?\n/i.exec(text.slice(i, i + 8)) : null;
  if (declared) {
    sep = declared[1];
    i += declared[0].length;
  } else if (sniffed) sep = sniff(text, i);
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else field += c;
    } else if (c === '"' && field === '') quoted = true;
    else if (c === sep) {
      row.push(field);
      field = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field);
      field = '';
      rows.push(row);
      row = [];
    } else field += c;
  }
  if (field !== '' || row.length) {
    row.push(field);
    rows.push(row);
  }
  return { rows, separator: sep };
}

const blank = (row: string[]) => row.every((c) => c.trim() === '');

export function parseCsv(text: string): string[][] {
  return records(text, false).rows.filter((r) => r.length > 1 || r[0] !== '');
}

/**
 * A table to import: its header (the first record not blank) and the records after it that are
 * not blank (an empty line, or only separators as Excel writes a sheet's empty rows), each with
 * its number in the file counting every record: the row a spreadsheet shows it on.
 */
export function parseTable(text: string): { header: string[]; rows: Array<{ cells: string[]; row: number }>; separator: string } | null {
  const { rows, separator } = records(text, true);
  const kept = rows.map((cells, k) => ({ cells, row: k + 1 })).filter((r) => !blank(r.cells));
  if (!kept.length) return null;
  return { header: kept[0].cells, rows: kept.slice(1), separator };
}

function quote(v: string, sep: string): string {
  return /["\r\n]/.test(v) || v.includes(sep) ? `"${v.replace(/"/g, '""')}"` : v;
}

/** CSV with this separator (the file's own, for rows given back), UTF-8 with a BOM: Excel reads it as UTF-8 only so. */
export function toCsv(rows: string[][], sep = ','): string {
  return '\ufeff' + rows.map((r) => r.map((v) => quote(v, sep)).join(sep)).join('\r\n') + '\r\n';
}
