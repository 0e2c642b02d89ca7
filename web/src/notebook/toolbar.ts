// The notebook's toolbar: buttons that run commands (commands/notebook.ts), with accessible
// names, in a role=toolbar (arrow keys move between them); the cell type select, the kernel
// status and the dirty indicator.
import { h } from '../shell/dom';
import type { CellType } from './model';
import type { ShownStatus } from './kernel';

/** DOWNLOADS are the formats the notebook downloads in (the server's /nbconvert exporters). */
export const DOWNLOADS: { format: string; label: string }[] = [
  { format: 'notebook', label: 'Notebook (.ipynb)' },
  { format: 'script', label: 'Script (.py)' },
  { format: 'html', label: 'HTML (.html)' },
  { format: 'markdown', label: 'Markdown (.md)' },
  { format: 'rst', label: 'reStructuredText (.rst)' },
  { format: 'latex', label: 'LaTeX (.tex)' },
  { format: 'asciidoc', label: 'AsciiDoc (.asciidoc)' },
];

interface ButtonSpec {
  /** The command the button runs (commands/notebook.ts). */
  action: string;
  label: string;
  text: string;
  title?: string;
}

// Groups of buttons; text is what shows, label the accessible name when they differ.
const GROUPS: ButtonSpec[][] = [
  [
    { action: 'save', label: 'Save', text: 'Save', title: 'Save and checkpoint (Ctrl-S)' },
    { action: 'rename', label: 'Rename', text: 'Rename' },
    { action: 'checkpoint', label: 'Checkpoint', text: 'Checkpoint', title: 'Create a checkpoint' },
    { action: 'revert', label: 'Revert', text: 'Revert', title: 'Revert to a checkpoint' },
    { action: 'copy-notebook', label: 'Make a copy', text: 'Make a copy' },
    { action: 'print', label: 'Print view', text: 'Print view' },
  ],
  [
    { action: 'insert-below', label: 'Insert cell below', text: '+', title: 'Insert cell below (B)' },
    { action: 'cut', label: 'Cut', text: 'Cut', title: 'Cut cell (X)' },
    { action: 'copy', label: 'Copy', text: 'Copy', title: 'Copy cell (C)' },
    { action: 'paste', label: 'Paste', text: 'Paste', title: 'Paste cell below (V)' },
    { action: 'move-up', label: 'Move up', text: '↑', title: 'Move cell up' },
    { action: 'move-down', label: 'Move down', text: '↓', title: 'Move cell down' },
  ],
  [
    { action: 'run-select-next', label: 'Run', text: '▶ Run', title: 'Run cell and select below (Shift-Enter)' },
    { action: 'run-all', label: 'Run all', text: 'Run all' },
    { action: 'run-above', label: 'Run all above', text: 'Run above' },
    { action: 'run-below', label: 'Run all below', text: 'Run below' },
    { action: 'interrupt', label: 'Interrupt', text: '■', title: 'Interrupt the kernel (I, I)' },
    { action: 'restart', label: 'Restart', text: '↻', title: 'Restart the kernel (0, 0)' },
    {
      action: 'restart-run-all',
      label: 'Restart and run all',
      text: '↻▶',
      title: 'Restart the kernel and run all cells',
    },
    { action: 'shutdown', label: 'Shut down', text: 'Shut down', title: 'Shut down the kernel' },
  ],
];

const STATUS_TEXT: Record<ShownStatus, string> = {
  starting: 'Kernel starting',
  idle: 'Kernel idle',
  busy: 'Kernel busy',
  restarting: 'Kernel restarting',
  dead: 'Kernel dead',
  reconnecting: 'Reconnecting',
  'no kernel': 'No kernel',
};

export class Toolbar {
  readonly node: HTMLElement;
  readonly status: HTMLElement;
  readonly dirty: HTMLElement;
  readonly saveState: HTMLElement;
  readonly kernelName: HTMLElement;
  private typeSelect: HTMLSelectElement;
  private downloadSelect: HTMLSelectElement;

  constructor(run: (command: string) => void, setType: (t: CellType) => void, download: (format: string) => void) {
    this.node = h('div', { class: 'nb-toolbar', role: 'toolbar', 'aria-label': 'Notebook' });
    for (const g of GROUPS) {
      const group = h('div', { class: 'nb-toolbar-group', role: 'group' });
      for (const b of g) {
        const el = h(
          'button',
          {
            type: 'button',
            class: 'nb-tool',
            'data-action': b.action,
            'aria-label': b.label !== b.text ? b.label : undefined,
            title: b.title ?? b.label,
          },
          b.text,
        );
        el.addEventListener('click', () => run(b.action));
        group.append(el);
      }
      this.node.append(group);
    }
    this.typeSelect = h(
      'select',
      { class: 'nb-cell-type', 'aria-label': 'Cell type' },
      h('option', { value: 'code' }, 'Code'),
      h('option', { value: 'markdown' }, 'Markdown'),
      h('option', { value: 'raw' }, 'Raw'),
    );
    this.typeSelect.addEventListener('change', () => setType(this.typeSelect.value as CellType));
    this.downloadSelect = h(
      'select',
      { class: 'nb-download', 'aria-label': 'Download as' },
      h('option', { value: '' }, 'Download…'),
      ...DOWNLOADS.map((d) => h('option', { value: d.format }, d.label)),
    );
    this.downloadSelect.addEventListener('change', () => {
      const format = this.downloadSelect.value;
      this.downloadSelect.value = '';
      if (format) {
        download(format);
      }
    });
    this.node.append(h('div', { class: 'nb-toolbar-group' }, this.typeSelect, this.downloadSelect));
    this.node.addEventListener('keydown', (e) => this.arrows(e));
    this.status = h(
      'span',
      { class: 'nb-kernel-status', role: 'status', 'aria-live': 'polite', 'data-kernel-status': 'starting' },
      STATUS_TEXT.starting,
    );
    this.dirty = h('span', { class: 'nb-dirty', 'data-dirty': 'false' }, '');
    this.saveState = h('span', { class: 'nb-save-state', role: 'status', 'aria-live': 'polite' }, '');
    this.kernelName = h('span', { class: 'nb-kernel-name' }, '');
  }

  /** Left/Right move between the toolbar's buttons (the toolbar pattern). */
  private arrows(e: KeyboardEvent): void {
    if (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') {
      return;
    }
    if ((e.target as HTMLElement).tagName === 'SELECT') {
      return;
    }
    const items = Array.from(this.node.querySelectorAll<HTMLElement>('button, select'));
    const i = items.indexOf(e.target as HTMLElement);
    if (i < 0) {
      return;
    }
    const next = items[(i + (e.key === 'ArrowRight' ? 1 : items.length - 1)) % items.length];
    next.focus();
    e.preventDefault();
  }

  setKernelName(name: string): void {
    this.kernelName.textContent = name;
  }

  setCellType(t: CellType): void {
    this.typeSelect.value = t;
  }

  setStatus(s: ShownStatus): void {
    this.status.dataset.kernelStatus = s === 'no kernel' ? 'none' : s;
    this.status.textContent = STATUS_TEXT[s];
    this.status.classList.toggle('nb-kernel-busy', s === 'busy');
  }

  setDirty(d: boolean): void {
    this.dirty.dataset.dirty = String(d);
    this.dirty.textContent = d ? 'Unsaved changes' : '';
  }

  setSaveState(text: string): void {
    this.saveState.textContent = text;
  }
}
