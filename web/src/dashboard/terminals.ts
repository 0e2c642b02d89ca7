// The dashboard's terminals: "New terminal", which starts one in the listed directory and opens
// its page in a new tab as Notebook 6's New → Terminal does, and the running terminals (a link
// to each one's page, its last activity, Shut down). Both are hidden on a server without
// terminals (the page's config says terminalsAvailable false, and GET /api/terminals is 404).
import { h } from '../shell/dom';
import type { TerminalModel } from '../shell/terminals';
import { DateFormatter } from './format';

export interface TerminalActions {
  shutdown(name: string): void;
}

const collator = new Intl.Collator(undefined, { numeric: true });

/** newTerminalButton is the toolbar's "New terminal" button, hidden until terminals are known
 * to be there. */
export function newTerminalButton(onClick: () => void): HTMLButtonElement {
  const b = h('button', { type: 'button', 'data-action': 'new-terminal', hidden: true }, 'New terminal');
  b.addEventListener('click', onClick);
  return b;
}

type Opener = (url: string, target: string) => WindowProxy | null;

/** openNewTerminal starts a terminal (start) and opens its page (pageURL) in a new tab. The tab
 * is opened first, in the click, since a browser blocks a window opened after the answer as a
 * popup; it says what it waits for, and closes when the start fails (the error is the
 * caller's to show). A browser that opens no window at all gets the page in this tab. */
export async function openNewTerminal(
  start: () => Promise<TerminalModel>,
  pageURL: (name: string) => string,
  open: Opener = (url, target) => window.open(url, target),
  here: (url: string) => void = (url) => window.location.assign(url),
): Promise<TerminalModel> {
  const w = open('', '_blank');
  if (w) {
    try {
      w.opener = null;
      w.document.title = 'Starting a terminal…';
      w.document.body.textContent = 'Starting a terminal…';
    } catch {
      // Not this page's to write into: it waits blank.
    }
  }
  let t: TerminalModel;
  try {
    t = await start();
  } catch (err) {
    w?.close();
    throw err;
  }
  if (w) {
    w.location.href = pageURL(t.name);
  } else {
    here(pageURL(t.name));
  }
  return t;
}

/** RunningTerminals is the table of the user's terminals; rows are kept by name and updated in
 * place. */
export class RunningTerminals {
  readonly element: HTMLTableElement;
  private readonly tbody: HTMLTableSectionElement;
  private readonly rows = new Map<string, HTMLTableRowElement>();
  private readonly empty: HTMLTableRowElement;

  constructor(
    private readonly pageLink: (name: string) => string,
    private readonly actions: TerminalActions,
    private readonly dates = new DateFormatter(),
  ) {
    this.tbody = h('tbody');
    this.empty = h('tr', { class: 'nb-empty' }, h('td', { colspan: 3 }, 'No terminals are running.'));
    this.element = h(
      'table',
      { class: 'nb-running-table nb-terminals-table' },
      h('caption', {}, 'Running terminals'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'Terminal'),
          h('th', { scope: 'col' }, 'Last activity'),
          h('th', { scope: 'col', class: 'nb-col-actions' }, 'Actions'),
        ),
      ),
      this.tbody,
    );
    this.element.hidden = true;
    this.tbody.append(this.empty);
    this.element.addEventListener('click', (ev) => {
      const b = (ev.target as Element).closest<HTMLButtonElement>('button[data-action="shutdown-terminal"]');
      const name = b?.closest('tr')?.dataset.terminal;
      if (name !== undefined) {
        this.actions.shutdown(name);
      }
    });
  }

  /** update shows the terminals, in their names' natural order ("2" before "10"); undefined
   * (a server without terminals) hides the table. */
  update(terminals: TerminalModel[] | undefined): void {
    this.element.hidden = terminals === undefined;
    const sorted = [...(terminals ?? [])].sort((a, b) => collator.compare(a.name, b.name));
    const seen = new Set<string>();
    let cursor: Element | null = this.tbody.firstElementChild;
    if (cursor === this.empty) {
      cursor = null;
      this.empty.remove();
    }
    for (const t of sorted) {
      seen.add(t.name);
      let row = this.rows.get(t.name);
      if (!row) {
        row = this.make(t.name);
        this.rows.set(t.name, row);
      }
      const activity = this.dates.format(t.last_activity);
      if (row.cells[1].textContent !== activity) {
        row.cells[1].textContent = activity;
      }
      if (row === cursor) {
        cursor = cursor.nextElementSibling;
      } else {
        this.tbody.insertBefore(row, cursor);
      }
    }
    for (const [name, row] of this.rows) {
      if (!seen.has(name)) {
        row.remove();
        this.rows.delete(name);
      }
    }
    if (sorted.length === 0) {
      this.tbody.replaceChildren(this.empty);
    }
  }

  private make(name: string): HTMLTableRowElement {
    return h(
      'tr',
      { 'data-terminal': name },
      // A terminal opens in a tab of its own, as notebooks do from the listing.
      h('td', { class: 'nb-col-path' }, h('a', { href: this.pageLink(name), target: '_blank' }, `Terminal ${name}`)),
      h('td', { class: 'nb-col-activity' }),
      h(
        'td',
        { class: 'nb-col-actions' },
        h(
          'button',
          {
            type: 'button',
            'data-action': 'shutdown-terminal',
            class: 'nb-danger',
            'aria-label': `Shut down terminal ${name}`,
          },
          'Shut down',
        ),
      ),
    );
  }
}
