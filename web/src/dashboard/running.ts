// Running notebooks: the user's sessions with their kernels, each with a Shut down button.
// Rows are keyed by session id and updated in place.
import type { Session } from '@jupyterlab/services';
import { h } from '../shell/dom';
import { isNotebook } from './paths';

export interface RunningActions {
  shutdown(id: string, path: string): void;
}

/** kernelState is what the table says of a session's kernel. */
export function kernelState(s: Session.IModel): string {
  if (!s.kernel) {
    return 'no kernel';
  }
  return s.kernel.execution_state || 'unknown';
}

export class Running {
  readonly element: HTMLTableElement;
  private readonly tbody: HTMLTableSectionElement;
  private readonly rows = new Map<string, HTMLTableRowElement>();
  private readonly empty: HTMLTableRowElement;

  constructor(
    private readonly notebookLink: (path: string) => string,
    private readonly actions: RunningActions,
  ) {
    this.tbody = h('tbody');
    this.empty = h('tr', { class: 'nb-empty' }, h('td', { colspan: 4 }, 'No notebooks are running.'));
    this.element = h(
      'table',
      { class: 'nb-running-table' },
      h('caption', {}, 'Running notebooks and their kernels'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'Notebook'),
          h('th', { scope: 'col' }, 'Kernel'),
          h('th', { scope: 'col' }, 'State'),
          h('th', { scope: 'col', class: 'nb-col-actions' }, 'Actions'),
        ),
      ),
      this.tbody,
    );
    this.tbody.append(this.empty);
    this.element.addEventListener('click', (ev) => {
      const b = (ev.target as Element).closest<HTMLButtonElement>('button[data-action="shutdown"]');
      const row = b?.closest('tr');
      if (b && row?.dataset.session) {
        this.actions.shutdown(row.dataset.session, row.dataset.path ?? '');
      }
    });
  }

  /** update shows the sessions, sorted by path. */
  update(sessions: Session.IModel[]): void {
    const sorted = [...sessions].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    const seen = new Set<string>();
    let cursor: Element | null = this.tbody.firstElementChild;
    if (cursor === this.empty) {
      cursor = null;
      this.empty.remove();
    }
    for (const s of sorted) {
      seen.add(s.id);
      let row = this.rows.get(s.id);
      if (!row) {
        row = this.make(s);
        this.rows.set(s.id, row);
      }
      this.patch(row, s);
      if (row === cursor) {
        cursor = cursor.nextElementSibling;
      } else {
        this.tbody.insertBefore(row, cursor);
      }
    }
    for (const [id, row] of this.rows) {
      if (!seen.has(id)) {
        row.remove();
        this.rows.delete(id);
      }
    }
    if (sorted.length === 0) {
      this.tbody.replaceChildren(this.empty);
    }
  }

  private make(s: Session.IModel): HTMLTableRowElement {
    return h(
      'tr',
      { 'data-session': s.id },
      h('td', { class: 'nb-col-path' }),
      h('td', { class: 'nb-col-kernel' }),
      h('td', { class: 'nb-col-state' }),
      h(
        'td',
        { class: 'nb-col-actions' },
        h('button', { type: 'button', 'data-action': 'shutdown', class: 'nb-danger' }, 'Shut down'),
      ),
    );
  }

  private patch(row: HTMLTableRowElement, s: Session.IModel): void {
    if (row.dataset.path !== s.path) {
      row.dataset.path = s.path;
      const cell = row.cells[0];
      cell.replaceChildren(
        isNotebook(s.path) ? h('a', { href: this.notebookLink(s.path) }, s.path) : h('span', {}, s.path || s.name),
      );
      row.cells[3].firstElementChild!.setAttribute('aria-label', `Shut down ${s.path || s.name}`);
    }
    setText(row.cells[1], s.kernel?.name ?? '');
    setText(row.cells[2], kernelState(s));
    row.cells[2].dataset.state = kernelState(s);
  }
}

function setText(el: HTMLElement, text: string): void {
  if (el.textContent !== text) {
    el.textContent = text;
  }
}
