// The directory's listing: a table of its files and directories, kept up to date in place
// (rows keyed by path, only changed cells touched, focus and inline renames kept), sortable
// by its column headers. Row buttons are handled by one listener on the table.
import { h } from '../shell/dom';
import { DateFormatter, formatSize, sortEntries, type SortKey, type SortOrder } from './format';
import { baseName, isNotebook, stemLength } from './paths';

/** What the listing shows of a contents model. */
export interface Entry {
  name: string;
  path: string;
  type: string;
  last_modified: string;
  size?: number | null;
}

/** Where the listing's links lead. */
export interface Links {
  dir(path: string): string;
  notebook(path: string): string;
  file(path: string): string;
  /** download is where a file downloads (as an attachment). */
  download(path: string): string;
}

/** What the row buttons do; each resolves when done (errors are the handler's to show). */
export interface ListingActions {
  /** rename resolves with the new path, or undefined when the rename failed. */
  rename(path: string, newName: string): Promise<string | undefined>;
  copy(path: string): void;
  delete(path: string, type: string): void;
}

interface RowState {
  entry: Entry;
  running: boolean;
  editing?: RenameEdit;
  // The row's parts, kept so that updates need no queries.
  nameCell: HTMLTableCellElement;
  link: HTMLAnchorElement;
  kind: HTMLElement;
  icon: HTMLElement;
  badge: HTMLElement;
  time: HTMLTimeElement;
  size: HTMLTableCellElement;
  rename: HTMLButtonElement;
  copy: HTMLButtonElement;
  download: HTMLAnchorElement;
  del: HTMLButtonElement;
}

interface RenameEdit {
  input: HTMLInputElement;
  done: boolean;
}

const columns: { key: SortKey; label: string }[] = [
  { key: 'name', label: 'Name' },
  { key: 'last_modified', label: 'Last modified' },
  { key: 'size', label: 'Size' },
];

/** typeLabel is what a row's type is called, for screen readers and the icon. */
function typeLabel(e: Entry): string {
  if (e.type === 'directory') {
    return 'Folder';
  }
  if (e.type === 'notebook' || isNotebook(e.name)) {
    return 'Notebook';
  }
  return 'File';
}

export class Listing {
  readonly element: HTMLTableElement;
  private readonly tbody: HTMLTableSectionElement;
  private readonly caption: HTMLTableCaptionElement;
  private readonly headers = new Map<SortKey, HTMLTableCellElement>();
  private readonly rows = new Map<string, HTMLTableRowElement>();
  private readonly state = new WeakMap<HTMLTableRowElement, RowState>();
  private readonly dates = new DateFormatter();
  private entries: Entry[] = [];
  private running = new Set<string>();
  private order: SortOrder = { key: 'name', ascending: true };
  private readonly empty: HTMLTableRowElement;

  constructor(
    private readonly dir: string,
    private readonly links: Links,
    private readonly actions: ListingActions,
  ) {
    this.caption = h('caption', {}, dir === '' ? 'Files in your home folder' : `Files in ${dir}`);
    const headRow = h('tr');
    for (const c of columns) {
      const button = h('button', { type: 'button', class: 'nb-sort', 'data-sort': c.key }, c.label);
      const th = h('th', { scope: 'col', class: `nb-col-${c.key}` }, button);
      this.headers.set(c.key, th);
      headRow.append(th);
    }
    headRow.append(h('th', { scope: 'col', class: 'nb-col-actions' }, 'Actions'));
    this.tbody = h('tbody');
    this.empty = h('tr', { class: 'nb-empty' }, h('td', { colspan: 4 }, 'This folder is empty.'));
    this.element = h('table', { class: 'nb-listing' }, this.caption, h('thead', {}, headRow), this.tbody);
    this.element.addEventListener('click', (ev) => this.onClick(ev));
    this.showOrder();
  }

  /** update shows the directory's entries and which notebooks run, touching only what changed. */
  update(entries: Entry[], running: Set<string> = this.running): void {
    this.entries = entries;
    this.running = running;
    this.render();
  }

  /** setRunning marks the notebooks that have a session. */
  setRunning(running: Set<string>): void {
    this.running = running;
    for (const row of this.rows.values()) {
      const s = this.state.get(row)!;
      this.patch(row, s.entry);
    }
  }

  /** sortBy orders the rows by a column (again on the same column: the other way). */
  sortBy(key: SortKey, ascending?: boolean): void {
    this.order = {
      key,
      ascending: ascending ?? (this.order.key === key ? !this.order.ascending : key === 'name'),
    };
    this.showOrder();
    this.render();
  }

  /** row is the row of a path, if it is shown. */
  row(path: string): HTMLTableRowElement | undefined {
    return this.rows.get(path);
  }

  /** paths are the paths shown, in order. */
  paths(): string[] {
    return Array.from(this.tbody.rows, (r) => r.dataset.path).filter((p): p is string => !!p);
  }

  /** names are the names in the directory (for asking before an upload replaces one). */
  names(): Set<string> {
    return new Set(this.entries.map((e) => e.name));
  }

  /** focusRow puts the focus on a row's link (after an action made or moved it). */
  focusRow(path: string): void {
    const row = this.rows.get(path);
    if (row) {
      this.state.get(row)!.link.focus();
    }
  }

  /** startRename turns a row's name into a text field; Enter (or leaving it) renames, Escape
   * gives up. */
  startRename(path: string): void {
    const row = this.rows.get(path);
    if (!row) {
      return;
    }
    const s = this.state.get(row)!;
    if (s.editing) {
      s.editing.input.focus();
      return;
    }
    const name = s.entry.name;
    const input = h('input', {
      type: 'text',
      class: 'nb-rename',
      value: name,
      'aria-label': `New name for ${name}`,
      spellcheck: 'false',
      autocomplete: 'off',
    });
    const edit: RenameEdit = { input, done: false };
    s.editing = edit;
    row.classList.add('nb-editing');
    s.link.hidden = true;
    s.nameCell.append(input);
    // focus says whether the row's link takes the focus after: not when the user left the
    // field for somewhere else.
    const finish = (newPath?: string, focus = true) => {
      edit.done = true;
      input.remove();
      s.editing = undefined;
      row.classList.remove('nb-editing');
      s.link.hidden = false;
      if (newPath && newPath !== row.dataset.path) {
        this.rekey(row, newPath);
      }
      if (focus) {
        this.focusRow(row.dataset.path!);
      }
    };
    let lastFailed: string | undefined;
    const commit = async (viaBlur: boolean) => {
      if (edit.done) {
        return;
      }
      const value = input.value.trim();
      // Leaving the field with nothing new (or with a name that just failed) gives up.
      if (value === '' || value === s.entry.name || (viaBlur && value === lastFailed)) {
        finish(undefined, !viaBlur);
        return;
      }
      edit.done = true; // no second commit from the blur that follows
      input.setAttribute('aria-busy', 'true');
      const newPath = await this.actions.rename(s.entry.path, value);
      input.removeAttribute('aria-busy');
      if (newPath === undefined) {
        lastFailed = value;
        edit.done = false;
        if (!viaBlur && input.isConnected) {
          input.focus();
          input.select();
        }
        return;
      }
      finish(newPath, !viaBlur);
    };
    input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter') {
        ev.preventDefault();
        void commit(false);
      } else if (ev.key === 'Escape') {
        ev.preventDefault();
        ev.stopPropagation();
        if (!edit.done) {
          finish();
        }
      }
    });
    input.addEventListener('blur', () => void commit(true));
    input.focus();
    input.setSelectionRange(0, stemLength(name, s.entry.type === 'directory'));
  }

  private rekey(row: HTMLTableRowElement, newPath: string): void {
    const s = this.state.get(row)!;
    const oldPath = row.dataset.path!;
    this.rows.delete(oldPath);
    const entry = { ...s.entry, path: newPath, name: baseName(newPath) };
    this.entries = this.entries.filter((e) => e.path !== newPath).map((e) => (e.path === oldPath ? entry : e));
    this.rows.set(newPath, row);
    this.patch(row, entry);
  }

  private showOrder(): void {
    for (const [key, th] of this.headers) {
      if (key === this.order.key) {
        th.setAttribute('aria-sort', this.order.ascending ? 'ascending' : 'descending');
      } else {
        th.removeAttribute('aria-sort');
      }
    }
  }

  private render(): void {
    const sorted = sortEntries(this.entries, this.order);
    const active = document.activeElement;
    const seen = new Set<string>();
    if (this.rows.size === 0) {
      // The first render (or one into an empty table): every row into one fragment.
      const frag = document.createDocumentFragment();
      for (const e of sorted) {
        const row = this.make(e);
        seen.add(e.path);
        frag.append(row);
      }
      this.tbody.replaceChildren(frag);
    } else {
      this.empty.remove();
      let cursor: Element | null = this.tbody.firstElementChild;
      for (const e of sorted) {
        seen.add(e.path);
        let row = this.rows.get(e.path);
        if (row) {
          this.patch(row, e);
        } else {
          row = this.make(e);
        }
        if (row === cursor) {
          cursor = cursor.nextElementSibling;
        } else {
          this.tbody.insertBefore(row, cursor);
        }
      }
      for (const [path, row] of this.rows) {
        if (!seen.has(path)) {
          row.remove();
          this.rows.delete(path);
        }
      }
    }
    if (sorted.length === 0) {
      this.tbody.replaceChildren(this.empty);
    }
    // A row moved by a new order loses the focus in some browsers: give it back.
    if (active instanceof HTMLElement && active !== document.activeElement && active.isConnected) {
      active.focus();
    }
  }

  private template: HTMLTableRowElement | undefined;

  /** make builds a row (name link, date, size, actions) as a copy of a template row: cloning
   * is several times faster than making each element, which counts for 1,000 rows. */
  private make(e: Entry): HTMLTableRowElement {
    this.template ??= h(
      'tr',
      {},
      h(
        'td',
        { class: 'nb-col-name' },
        h('span', { class: 'nb-icon', 'aria-hidden': 'true' }),
        h('span', { class: 'nb-sr-only' }),
        h('a', { class: 'nb-name' }),
        h('span', { class: 'nb-running', hidden: true }, 'Running'),
      ),
      h('td', { class: 'nb-col-last_modified' }, h('time')),
      h('td', { class: 'nb-col-size' }),
      h(
        'td',
        { class: 'nb-col-actions' },
        h('button', { type: 'button', 'data-action': 'rename' }, 'Rename'),
        h('button', { type: 'button', 'data-action': 'copy' }, 'Copy'),
        h('a', { class: 'nb-button nb-download', download: '' }, 'Download'),
        h('button', { type: 'button', 'data-action': 'delete', class: 'nb-danger' }, 'Delete'),
      ),
    );
    const row = this.template.cloneNode(true) as HTMLTableRowElement;
    const [nameCell, dateCell, size, actions] = row.children as unknown as HTMLTableCellElement[];
    const [icon, kind, link, badge] = nameCell.children as unknown as HTMLElement[];
    const [rename, copy, download, del] = actions.children as unknown as [
      HTMLButtonElement,
      HTMLButtonElement,
      HTMLAnchorElement,
      HTMLButtonElement,
    ];
    // A blank entry, so that patch fills every cell.
    const blank: Entry = { name: '\0', path: '\0', type: '', last_modified: '\0', size: NaN };
    this.state.set(row, {
      entry: blank,
      running: false,
      nameCell,
      link: link as HTMLAnchorElement,
      kind,
      icon,
      badge,
      time: dateCell.firstElementChild as HTMLTimeElement,
      size,
      rename,
      copy,
      download,
      del,
    });
    this.rows.set(e.path, row);
    this.patch(row, e);
    return row;
  }

  /** patch brings a row up to date with its entry, touching only the cells that changed. */
  private patch(row: HTMLTableRowElement, e: Entry): void {
    const s = this.state.get(row)!;
    const old = s.entry;
    const running = e.type === 'notebook' || isNotebook(e.name) ? this.running.has(e.path) : false;
    if (old.path !== e.path || old.name !== e.name || old.type !== e.type) {
      s.entry = e;
      row.dataset.path = e.path;
      row.dataset.type = e.type;
      this.relabel(row, e);
    }
    if (old.last_modified !== e.last_modified) {
      s.time.setAttribute('datetime', e.last_modified ?? '');
      s.time.textContent = this.dates.format(e.last_modified);
    }
    if (old.size !== e.size || old.type !== e.type) {
      s.size.textContent = e.type === 'directory' ? '' : formatSize(e.size);
    }
    if (running !== s.running) {
      s.running = running;
      s.badge.hidden = !running;
      row.classList.toggle('nb-is-running', running);
    }
    s.entry = e;
  }

  /** relabel sets what depends on the name and type: the link, its target, the buttons' names. */
  private relabel(row: HTMLTableRowElement, e: Entry): void {
    const s = this.state.get(row)!;
    const link = s.link;
    const kind = typeLabel(e);
    s.kind.textContent = kind + ': ';
    s.icon.dataset.kind = kind.toLowerCase();
    link.textContent = e.name;
    if (e.type === 'directory') {
      link.setAttribute('href', this.links.dir(e.path));
      link.removeAttribute('target');
      link.removeAttribute('rel');
    } else {
      // Notebooks and files open in a tab of their own, as Notebook's dashboard opens them:
      // the dashboard stays where it was.
      link.setAttribute(
        'href',
        e.type === 'notebook' || isNotebook(e.name) ? this.links.notebook(e.path) : this.links.file(e.path),
      );
      link.setAttribute('target', '_blank');
      link.setAttribute('rel', 'noopener');
    }
    s.rename.setAttribute('aria-label', `Rename ${e.name}`);
    s.copy.setAttribute('aria-label', `Copy ${e.name}`);
    s.del.setAttribute('aria-label', `Delete ${e.name}`);
    // The contents API copies files, not directories; a directory has nothing to download.
    s.copy.hidden = e.type === 'directory';
    s.download.hidden = e.type === 'directory';
    if (e.type === 'directory') {
      s.download.removeAttribute('href');
    } else {
      s.download.setAttribute('href', this.links.download(e.path));
      s.download.setAttribute('aria-label', `Download ${e.name}`);
    }
  }

  private onClick(ev: Event): void {
    const target = ev.target as Element;
    const sort = target.closest<HTMLButtonElement>('button.nb-sort');
    if (sort) {
      this.sortBy(sort.dataset.sort as SortKey);
      return;
    }
    const button = target.closest<HTMLButtonElement>('button[data-action]');
    const row = button?.closest('tr');
    if (!button || !row || !row.dataset.path) {
      return;
    }
    const s = this.state.get(row);
    if (!s) {
      return;
    }
    switch (button.dataset.action) {
      case 'rename':
        this.startRename(s.entry.path);
        break;
      case 'copy':
        this.actions.copy(s.entry.path);
        break;
      case 'delete':
        this.actions.delete(s.entry.path, s.entry.type);
        break;
    }
  }
}
