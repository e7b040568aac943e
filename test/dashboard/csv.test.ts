// The dashboard's CSV reading (web/src/csv.ts), on files as spreadsheets write them: European
// Excel's semicolons, tabs, Windows-1252, empty rows, cells with line breaks.
import assert from 'node:assert/strict';
import { decodeText, parseTable, toCsv } from '../../web/src/csv.ts';

const cells = (text: string) => {
  const t = parseTable(text)!;
  return [t.header, ...t.rows.map((r) => r.cells)];
};

describe('dashboard CSV reading', () => {
  it('writes rows back with the given separator, quoting what holds it, UTF-8 with a BOM for Excel', () => {
    assert.equal(toCsv([['E-Mail', 'Firma'], ['a@x.de', 'Müller; Söhne'], ['b@x.de', 'A, "B"']], ';'), '\ufeffE-Mail;Firma\r\na@x.de;"Müller; Söhne"\r\nb@x.de;"A, ""B"""\r\n');
  });

  it('takes the separator of the header line: a comma, a semicolon (European Excel), a tab, or an Excel sep= line', () => {
    assert.deepEqual(cells('Email;Vorname;Firma\r\nmax@x.de;Max;"Müller, Meier; GmbH"\r\n'), [
      ['Email', 'Vorname', 'Firma'],
      ['max@x.de', 'Max', 'Müller, Meier; GmbH'],
    ]);
    assert.deepEqual(cells('Email\tFirst Name\nann@x.com\tAnn, Jr.\n'), [
      ['Email', 'First Name'],
      ['ann@x.com', 'Ann, Jr.'],
    ]);
    assert.deepEqual(cells('email,note\na@x.com,"a; b; c"\n'), [
      ['email', 'note'],
      ['a@x.com', 'a; b; c'],
    ]);
    assert.deepEqual(parseTable('sep=;\r\nEmail;Name\r\na@x.com;A, B\r\n'), { header: ['Email', 'Name'], rows: [{ cells: ['a@x.com', 'A, B'], row: 2 }], separator: ';' });
  });

  it('reads Windows-1252 (Excel "CSV" on Western Windows) and UTF-16 as the characters the user typed; UTF-8 with or without a BOM', () => {
    // (Not € (0x80): Node's TextDecoder reads windows-1252 as Latin-1, which has none; Chromium's does.)
    const cp1252 = Buffer.from('email;name\r\nz@x.de;Jürgen Müßig\r\n', 'latin1');
    assert.deepEqual(cells(decodeText(cp1252)), [
      ['email', 'name'],
      ['z@x.de', 'Jürgen Müßig'],
    ]);
    assert.equal(decodeText(Buffer.from('\ufeffemail,name\nz@x.de,Jürgen\n')), 'email,name\nz@x.de,Jürgen\n');
    assert.equal(decodeText(Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('email\tname\nz@x.de\tJürgen\n', 'utf16le')])), 'email\tname\nz@x.de\tJürgen\n');
  });

  it('leaves out empty rows, also those of separators only, and numbers each row as the spreadsheet shows it', () => {
    const text = ['Email,First Name,Note', 'a@x.com,A,x', '', ',,', 'b@x.com,B,"two', 'lines"', ' , , ', 'c@x.com,C,y', ''].join('\r\n');
    assert.deepEqual(parseTable(text), {
      header: ['Email', 'First Name', 'Note'],
      rows: [
        { cells: ['a@x.com', 'A', 'x'], row: 2 },
        { cells: ['b@x.com', 'B', 'two\r\nlines'], row: 5 },
        { cells: ['c@x.com', 'C', 'y'], row: 7 },
      ],
      separator: ',',
    });
    assert.equal(parseTable('\r\n,,\r\n'), null);
  });
});
