// How the listing shows sizes and dates, and how it sorts: cheap, made once, pure.

const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** formatSize shows a number of bytes in binary units: "0 B", "512 B", "1.5 KiB", "12 MiB". */
export function formatSize(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes) || bytes < 0) {
    return '';
  }
  let i = 0;
  let v = bytes;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  if (i === 0) {
    return `${bytes} B`;
  }
  // One decimal below 10 (1.5 KiB), none above (12 MiB); never "10.0" from rounding 9.96.
  const s = v < 9.95 ? v.toFixed(1) : Math.round(v).toString();
  if (s === '1024' && i < units.length - 1) {
    return `1.0 ${units[i + 1]}`;
  }
  return `${s} ${units[i]}`;
}

/** DateFormatter formats the API's ISO dates with one Intl.DateTimeFormat, made once. */
export class DateFormatter {
  private readonly fmt: Intl.DateTimeFormat;

  constructor(locale?: string, timeZone?: string) {
    this.fmt = new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'short', timeZone });
  }

  /** format is the date shown, '' for a missing or unreadable date. */
  format(iso: string | null | undefined): string {
    if (!iso) {
      return '';
    }
    const t = Date.parse(iso);
    return Number.isNaN(t) ? '' : this.fmt.format(t);
  }
}

/** What the listing sorts: the fields of a contents model it shows. */
export interface SortableEntry {
  name: string;
  type: string;
  last_modified: string;
  size?: number | null;
}

export type SortKey = 'name' | 'last_modified' | 'size';

export interface SortOrder {
  key: SortKey;
  ascending: boolean;
}

const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });

/** compareEntries orders directories before files whatever the order (as Jupyter does), then by
 * the key (names in natural order: "nb2" before "nb10"), then by name to break ties. */
export function compareEntries(a: SortableEntry, b: SortableEntry, order: SortOrder): number {
  const da = a.type === 'directory' ? 0 : 1;
  const db = b.type === 'directory' ? 0 : 1;
  if (da !== db) {
    return da - db;
  }
  let c = 0;
  switch (order.key) {
    case 'last_modified':
      c = (Date.parse(a.last_modified) || 0) - (Date.parse(b.last_modified) || 0);
      break;
    case 'size':
      c = (a.size ?? -1) - (b.size ?? -1);
      break;
  }
  if (c === 0) {
    c = collator.compare(a.name, b.name) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  }
  return order.ascending ? c : -c;
}

/** sortEntries is a sorted copy. */
export function sortEntries<T extends SortableEntry>(entries: readonly T[], order: SortOrder): T[] {
  return [...entries].sort((a, b) => compareEntries(a, b, order));
}
