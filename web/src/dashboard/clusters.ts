// Clusters (ipyparallel or Dask): profile, framework, status, engines (a dask cluster's
// workers), a link to a dask cluster's dashboard, and a form per cluster to start it with a
// number of engines, stop it or delete it; and a form to make a new one of either framework. Rows are keyed by
// profile and updated in place; a number the user is typing is never overwritten by polling.
import { h } from '../shell/dom';

/** Cluster is the API's cluster model (IPython's plus nbkube's fields). */
export interface Cluster {
  profile: string;
  profile_dir?: string;
  status: 'running' | 'stopped';
  n: number;
  cluster_id?: string;
  engines_ready: number;
  engines_busy?: number;
  controller_ready?: boolean;
  ready?: boolean;
  last_activity?: string | null;
  reason?: string;
  message?: string;
  framework?: Framework;
  tasks?: number;
  dashboard_url?: string;
}

/** Framework is what a cluster runs. */
export type Framework = 'ipyparallel' | 'dask';

export interface ClusterActions {
  start(profile: string, n: number): void;
  stop(profile: string): void;
  remove(profile: string): void;
}

/** Me is what the dashboard reads of GET /api/me: the user's engines limit, when policies set one. */
export interface Me {
  quota?: { limits: { engines: number | null } };
}

/** mayMakeClusters tells whether the user's policies leave them engines (no policy: yes). */
export function mayMakeClusters(me: Me): boolean {
  return me.quota?.limits.engines !== 0;
}

/** profileProblem tells why value cannot name a new cluster, or '' when it can (the API's rule). */
export function profileProblem(value: string): string {
  if (value === '') {
    return 'Enter a name for the cluster.';
  }
  if (value.length > 40) {
    return 'A cluster name has at most 40 characters.';
  }
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(value)) {
    return "Use lowercase letters, digits and '-', starting and ending with a letter or digit.";
  }
  return '';
}

/**
 * NewCluster is the form that makes a cluster: a name, a framework and a number of engines.
 * create resolves true once the cluster is made; the name is then cleared.
 */
export class NewCluster {
  readonly element: HTMLFormElement;
  readonly name: HTMLInputElement;
  readonly framework: HTMLSelectElement;
  readonly engines: HTMLInputElement;

  constructor(create: (profile: string, n: number, framework: Framework) => Promise<boolean>) {
    this.framework = h(
      'select',
      { id: 'nb-new-cluster-framework' },
      h('option', { value: 'ipyparallel', selected: true }, 'ipyparallel'),
      h('option', { value: 'dask' }, 'Dask'),
    );
    this.name = h('input', {
      type: 'text',
      id: 'nb-new-cluster-name',
      maxlength: 40,
      autocomplete: 'off',
      spellcheck: 'false',
      placeholder: 'e.g. analysis',
      required: true,
    });
    this.engines = h('input', {
      type: 'number',
      id: 'nb-new-cluster-engines',
      min: 0,
      max: MAX_ENGINES,
      step: 1,
      inputmode: 'numeric',
      value: 2,
    });
    const button = h('button', { type: 'submit' }, 'Create');
    this.element = h(
      'form',
      { class: 'nb-new-cluster', 'aria-label': 'New cluster', novalidate: true },
      h('label', { for: this.name.id }, 'New cluster'),
      this.name,
      h('label', { for: this.framework.id }, 'Framework'),
      this.framework,
      h('label', { for: this.engines.id }, 'Engines'),
      this.engines,
      button,
    );
    for (const input of [this.name, this.engines]) {
      input.addEventListener('input', () => input.setCustomValidity(''));
    }
    this.element.addEventListener('submit', (ev) => {
      ev.preventDefault();
      if (button.getAttribute('aria-disabled') === 'true') {
        return;
      }
      const profile = this.name.value.trim();
      const problem = profileProblem(profile);
      if (problem) {
        this.refuse(this.name, problem);
        return;
      }
      const n = parseEngines(this.engines.value);
      if (n === undefined) {
        this.refuse(this.engines, `Enter a whole number from 0 to ${MAX_ENGINES}.`);
        return;
      }
      setDisabled(button, true);
      void create(profile, n, this.framework.value === 'dask' ? 'dask' : 'ipyparallel').then((made) => {
        setDisabled(button, false);
        if (made) {
          this.name.value = '';
        }
      });
    });
  }

  private refuse(input: HTMLInputElement, why: string): void {
    input.setCustomValidity(why);
    input.reportValidity();
    input.focus();
  }
}

/** clusterStatus is what the Status column says. */
export function clusterStatus(c: Cluster): string {
  if (c.status !== 'running') {
    return c.reason || c.message ? `stopped (${c.message || c.reason})` : 'stopped';
  }
  if (c.ready) {
    return 'running';
  }
  const dask = c.framework === 'dask';
  if (!c.controller_ready) {
    return dask ? 'starting scheduler' : 'starting controller';
  }
  return dask ? 'starting workers' : 'starting engines';
}

/** frameworkName is what the Framework column says. */
export function frameworkName(c: Cluster): string {
  return c.framework === 'dask' ? 'Dask' : 'ipyparallel';
}

/** engineCount is "ready / asked for". */
export function engineCount(c: Cluster): string {
  return `${c.engines_ready ?? 0} / ${c.n ?? 0}`;
}

export const MAX_ENGINES = 1024;

/** parseEngines reads the number input: an integer 0-1024, else undefined. */
export function parseEngines(value: string): number | undefined {
  if (!/^\s*\d+\s*$/.test(value)) {
    return undefined;
  }
  const n = Number(value);
  return n >= 0 && n <= MAX_ENGINES ? n : undefined;
}

export class Clusters {
  readonly element: HTMLTableElement;
  private readonly tbody: HTMLTableSectionElement;
  private readonly rows = new Map<string, HTMLTableRowElement>();
  private readonly empty: HTMLTableRowElement;

  constructor(private readonly actions: ClusterActions) {
    this.tbody = h('tbody');
    this.empty = h('tr', { class: 'nb-empty' }, h('td', { colspan: 6 }, 'You have no clusters.'));
    this.tbody.append(this.empty);
    this.element = h(
      'table',
      { class: 'nb-clusters-table' },
      h('caption', {}, 'Clusters'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'Profile'),
          h('th', { scope: 'col' }, 'Framework'),
          h('th', { scope: 'col' }, 'Status'),
          h('th', { scope: 'col' }, 'Engines ready'),
          h('th', { scope: 'col' }, 'Engines to start'),
          h('th', { scope: 'col', class: 'nb-col-actions' }, 'Actions'),
        ),
      ),
      this.tbody,
    );
    this.element.addEventListener('click', (ev) => {
      const b = (ev.target as Element).closest<HTMLButtonElement>('button[data-action]');
      const row = b?.closest('tr');
      const profile = row?.dataset.profile;
      if (!b || !row || profile === undefined || b.getAttribute('aria-disabled') === 'true') {
        return;
      }
      if (b.dataset.action === 'stop') {
        this.actions.stop(profile);
        return;
      }
      if (b.dataset.action === 'delete') {
        this.actions.remove(profile);
        return;
      }
      const input = row.querySelector<HTMLInputElement>('input[type=number]')!;
      const n = parseEngines(input.value);
      if (n === undefined || !input.checkValidity()) {
        input.setCustomValidity(`Enter a whole number from 0 to ${MAX_ENGINES}.`);
        input.reportValidity();
        input.focus();
        return;
      }
      delete input.dataset.dirty;
      this.actions.start(profile, n);
    });
    this.element.addEventListener('input', (ev) => {
      const input = ev.target as HTMLInputElement;
      if (input.type === 'number') {
        input.dataset.dirty = '1';
        input.setCustomValidity('');
      }
    });
    this.element.addEventListener('keydown', (ev) => {
      // Enter in the number field starts the cluster, as submitting a form would.
      const input = ev.target as HTMLInputElement;
      if (ev.key === 'Enter' && input.type === 'number') {
        ev.preventDefault();
        input.closest('tr')?.querySelector<HTMLButtonElement>('button[data-action="start"]')?.click();
      }
    });
  }

  /** update shows the clusters, sorted by profile. */
  update(clusters: Cluster[]): void {
    const sorted = [...clusters].sort((a, b) => (a.profile < b.profile ? -1 : a.profile > b.profile ? 1 : 0));
    const seen = new Set<string>();
    let cursor: Element | null = this.tbody.firstElementChild;
    if (cursor === this.empty) {
      cursor = null;
      this.empty.remove();
    }
    for (const c of sorted) {
      seen.add(c.profile);
      let row = this.rows.get(c.profile);
      if (!row) {
        row = this.make(c);
        this.rows.set(c.profile, row);
      }
      this.patch(row, c);
      if (row === cursor) {
        cursor = cursor.nextElementSibling;
      } else {
        this.tbody.insertBefore(row, cursor);
      }
    }
    for (const [p, row] of this.rows) {
      if (!seen.has(p)) {
        row.remove();
        this.rows.delete(p);
      }
    }
    if (sorted.length === 0) {
      this.tbody.replaceChildren(this.empty);
    }
  }

  private make(c: Cluster): HTMLTableRowElement {
    const id = `nb-engines-${encodeURIComponent(c.profile).replace(/%/g, '_')}`;
    return h(
      'tr',
      { 'data-profile': c.profile },
      h('th', { scope: 'row', class: 'nb-col-profile' }, c.profile),
      h('td', { class: 'nb-col-framework' }, frameworkName(c)),
      h('td', { class: 'nb-col-status' }),
      h('td', { class: 'nb-col-engines' }),
      h(
        'td',
        { class: 'nb-col-n' },
        h('label', { class: 'nb-sr-only', for: id }, `Engines for ${c.profile}`),
        h('input', { type: 'number', id, min: 0, max: MAX_ENGINES, step: 1, inputmode: 'numeric', value: c.n ?? 0 }),
      ),
      h(
        'td',
        { class: 'nb-col-actions' },
        h('button', { type: 'button', 'data-action': 'start', 'aria-label': `Start ${c.profile}` }, 'Start'),
        h('button', { type: 'button', 'data-action': 'stop', 'aria-label': `Stop ${c.profile}` }, 'Stop'),
        h('button', { type: 'button', 'data-action': 'delete', 'aria-label': `Delete ${c.profile}` }, 'Delete'),
        h(
          'a',
          {
            class: 'nb-dashboard-link',
            target: '_blank',
            rel: 'noopener',
            hidden: true,
            'aria-label': `Dashboard of ${c.profile}`,
          },
          'Dashboard',
        ),
      ),
    );
  }

  private patch(row: HTMLTableRowElement, c: Cluster): void {
    const status = clusterStatus(c);
    if (row.cells[2].textContent !== status) {
      row.cells[2].textContent = status;
    }
    row.dataset.status = c.status;
    const engines = engineCount(c);
    if (row.cells[3].textContent !== engines) {
      row.cells[3].textContent = engines;
    }
    // A dask cluster's dashboard, while its scheduler runs.
    const link = row.querySelector<HTMLAnchorElement>('a.nb-dashboard-link')!;
    const url = c.status === 'running' && c.controller_ready ? (c.dashboard_url ?? '') : '';
    link.hidden = url === '';
    if (url && link.getAttribute('href') !== url) {
      link.setAttribute('href', url);
    }
    const input = row.querySelector<HTMLInputElement>('input[type=number]')!;
    if (!input.dataset.dirty && document.activeElement !== input && input.value !== String(c.n ?? 0)) {
      input.value = String(c.n ?? 0);
    }
    const running = c.status === 'running';
    const start = row.querySelector<HTMLButtonElement>('button[data-action="start"]')!;
    const stop = row.querySelector<HTMLButtonElement>('button[data-action="stop"]')!;
    // aria-disabled, not disabled: the buttons stay in the tab order and keep the focus.
    setDisabled(start, running);
    setDisabled(stop, !running);
    input.disabled = false;
  }
}

function setDisabled(b: HTMLButtonElement, off: boolean): void {
  if (off) {
    b.setAttribute('aria-disabled', 'true');
  } else {
    b.removeAttribute('aria-disabled');
  }
}
