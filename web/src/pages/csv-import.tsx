// Leads from a CSV file: map the columns, send them in chunks through the bulk endpoint with a
// progress bar, then a summary of enrolled / updated / invalid rows, the invalid ones downloadable.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, post } from '../api.ts';
import { decodeText, parseTable, toCsv } from '../csv.ts';
import { ErrorNote, Field } from '../ui.tsx';

export const CHUNK = 1000;
/**
 * A chunk's leads as JSON, at most this many bytes: well under the API's 10 MB body limit (a
 * chunk of wide rows, long notes, was one request past it, refused 413: the import stopped).
 */
const CHUNK_BYTES = 4 * 1024 * 1024;
const STANDARD = ['email', 'firstName', 'lastName', 'company', 'jobTitle'];
const RESERVED = new Set([...STANDARD, 'unsubscribeUrl']);

/** The column's default target: a standard field by a loose name match, else a custom field. */
function guess(header: string): string {
  const h = header.toLowerCase().replace(/[^a-z]/g, '');
  const known: Record<string, string> = { email: 'email', emailaddress: 'email', mail: 'email', firstname: 'firstName', first: 'firstName', givenname: 'firstName', lastname: 'lastName', last: 'lastName', surname: 'lastName', familyname: 'lastName', company: 'company', companyname: 'company', organization: 'company', organisation: 'company', jobtitle: 'jobTitle', title: 'jobTitle', position: 'jobTitle', role: 'jobTitle' };
  return known[h] ?? `custom:${customName(header)}`;
}

function customName(header: string): string {
  let n = header.trim().replace(/[^A-Za-z0-9_]+/g, '_').replace(/^_+|_+$/g, '');
  if (!/^[A-Za-z_]/.test(n)) n = `f_${n}`;
  n = n.slice(0, 64) || 'field';
  // Reserved in any case: the API refuses `Company` as a custom field (the standard field misspelled).
  return [...RESERVED].some((r) => r.toLowerCase() === n.toLowerCase()) ? `${n}_custom` : n;
}

interface Invalid {
  /** The row of the file (as a spreadsheet numbers it: the header is row 1). */
  line: number;
  row: string[];
  reason: string;
}

interface Progress {
  done: number;
  total: number;
  enrolled: number;
  updated: number;
  invalid: Invalid[];
  finished: boolean;
  failure?: unknown;
}

export function CsvImport({ campaignId, onImported }: { campaignId: string; onImported: () => void }) {
  const [table, setTable] = useState<ReturnType<typeof parseTable>>(null);
  const [fileName, setFileName] = useState('');
  const [mapping, setMapping] = useState<string[]>([]);
  const [progress, setProgress] = useState<Progress | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  const [downloadUrl, setDownloadUrl] = useState('');
  useEffect(() => () => void (downloadUrl && URL.revokeObjectURL(downloadUrl)), [downloadUrl]);

  const header = table?.header ?? [];
  const body = table?.rows ?? [];
  const running = progress !== null && !progress.finished;

  const readFile = async (file: File | undefined) => {
    setProgress(null);
    setError(undefined);
    if (!file) return setTable(null);
    const parsed = parseTable(decodeText(new Uint8Array(await file.arrayBuffer())));
    if (!parsed?.rows.length) {
      setTable(null);
      setError(new Error(`${file.name} has ${!parsed ? 'no rows' : 'a header but no rows'}: the first line names the columns, each further line is a lead.`));
      return;
    }
    setFileName(file.name);
    setTable(parsed);
    setMapping(parsed.header.map(guess));
  };

  const toLead = (row: string[]) => {
    const lead: Record<string, string> = {};
    mapping.forEach((target, i) => {
      const v = (row[i] ?? '').trim();
      if (target === 'ignore' || v === '') return;
      lead[target.startsWith('custom:') ? target.slice(7) : target] = v;
    });
    return lead;
  };

  const start = async () => {
    const p: Progress = { done: 0, total: body.length, enrolled: 0, updated: 0, invalid: [], finished: false };
    setProgress({ ...p });
    const chunks: Array<typeof body> = [];
    const encoder = new TextEncoder();
    for (let k = 0, bytes = 0; k < body.length; k++) {
      const n = encoder.encode(JSON.stringify(toLead(body[k].cells))).length + 1;
      if (k === 0 || chunks[chunks.length - 1].length === CHUNK || bytes + n > CHUNK_BYTES) {
        chunks.push([]);
        bytes = 0;
      }
      chunks[chunks.length - 1].push(body[k]);
      bytes += n;
    }
    for (const part of chunks) {
      // Rows are checked by the server; a rejected chunk writes nothing, so its invalid rows are
      // set aside (with the server's words) and the rest sent again.
      let chunk = part.map((r) => ({ row: r.cells, line: r.row }));
      const noEmail = chunk.filter((c) => !toLead(c.row).email);
      noEmail.forEach((c) => p.invalid.push({ ...c, reason: 'no email address' }));
      chunk = chunk.filter((c) => toLead(c.row).email);
      for (let attempt = 0; chunk.length > 0 && attempt < 5; attempt++) {
        try {
          const r = await post<{ enrolled: number; updated: number }>(`/v1/campaigns/${campaignId}/leads/bulk`, { leads: chunk.map((c) => toLead(c.row)) });
          p.enrolled += r.enrolled;
          p.updated += r.updated;
          chunk = [];
        } catch (e) {
          if (!(e instanceof ApiError) || e.status !== 422 || e.errors.length === 0) {
            p.failure = e;
            p.finished = true;
            setProgress({ ...p });
            onImported();
            return;
          }
          const bad = new Map<number, string>();
          for (const it of e.errors) if (it.index !== undefined) bad.set(it.index, [bad.get(it.index), (it.field ? `${it.field}: ` : '') + it.message].filter(Boolean).join('; '));
          if (bad.size === 0) {
            p.failure = e;
            p.finished = true;
            setProgress({ ...p });
            return;
          }
          chunk.forEach((c, k) => bad.has(k) && p.invalid.push({ ...c, reason: bad.get(k)! }));
          chunk = chunk.filter((_, k) => !bad.has(k));
        }
      }
      p.done += part.length;
      setProgress({ ...p });
    }
    p.finished = true;
    p.invalid.sort((a, b) => a.line - b.line);
    setProgress({ ...p });
    if (p.invalid.length) {
      const csv = toCsv([[...header, 'row', 'error'], ...p.invalid.map((x) => [...x.row, String(x.line), x.reason])], table?.separator);
      setDownloadUrl(URL.createObjectURL(new Blob([csv], { type: 'text/csv' })));
    }
    onImported();
  };

  return (
    <section class="card" aria-labelledby="import-h">
      <h2 id="import-h">Import leads from CSV</h2>
      <p class="muted">The first line names the columns. Leads are matched by email: an existing lead is updated and re-enrolled, a new one created.</p>
      <Field label="CSV file">
        <input
          type="file"
          accept=".csv,text/csv"
          disabled={running}
          onChange={(e) => {
            const input = e.currentTarget;
            const file = input.files?.[0];
            // Emptied once taken (the legend names the file): choosing the same file again, fixed
            // or to import it again, reads it again; the browser fires no change for the same file.
            if (file) void readFile(file).finally(() => (input.value = ''));
          }}
        />
      </Field>
      <ErrorNote error={error} />
      {table && (
        <>
          <fieldset disabled={running}>
            <legend>
              Columns of {fileName} ({body.length.toLocaleString('en')} rows)
            </legend>
            <div class="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th scope="col">column</th>
                    <th scope="col">first value</th>
                    <th scope="col">becomes</th>
                  </tr>
                </thead>
                <tbody>
                  {header.map((h, i) => (
                    <tr key={i}>
                      <td>{h}</td>
                      <td class="muted">{body[0]?.cells[i]}</td>
                      <td>
                          <select aria-label={`Column ${h} becomes`} value={mapping[i]} onChange={(e) => setMapping(mapping.map((m, j) => (j === i ? e.currentTarget.value : m)))}>
                            {STANDARD.map((f) => (
                              <option key={f} value={f}>
                                {f}
                              </option>
                            ))}
                            <option value={`custom:${customName(h)}`}>custom field {customName(h)}</option>
                            <option value="ignore">(ignore)</option>
                          </select>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </fieldset>
          {!mapping.includes('email') && <p class="error">Map one column to email: it is the key leads are matched by.</p>}
          <button type="button" disabled={!mapping.includes('email')} aria-disabled={running || undefined} onClick={() => running || void start()}>
            Import {body.length.toLocaleString('en')} rows
          </button>
        </>
      )}
      {progress && (
        <div class="stack" aria-live="polite">
          <label>
            Progress: {progress.done.toLocaleString('en')} of {progress.total.toLocaleString('en')} rows
            <progress max={progress.total} value={progress.done} />
          </label>
          {progress.finished && (
            <p class={progress.failure ? 'error' : 'ok'} data-testid="import-summary">
              {progress.failure ? 'The import stopped. ' : 'Import finished: '}
              {progress.enrolled} enrolled, {progress.updated} updated, {progress.invalid.length} invalid.
            </p>
          )}
          {progress.failure !== undefined && <ErrorNote error={progress.failure} />}
          {progress.finished && progress.invalid.length > 0 && (
            <>
              <ul>
                {progress.invalid.slice(0, 10).map((x) => (
                  <li key={x.line}>
                    row {x.line}: {x.reason}
                  </li>
                ))}
              </ul>
              {downloadUrl && (
                <a class="button" href={downloadUrl} download={`${fileName.replace(/\.csv$/i, '')}-invalid.csv`}>
                  Download the {progress.invalid.length} invalid rows
                </a>
              )}
            </>
          )}
        </div>
      )}
    </section>
  );
}
