// The toolbar: a new notebook with a chosen kernel, a new folder, and uploads (with a progress
// bar per file).
import type { KernelSpec } from '@jupyterlab/services';
import { h } from '../shell/dom';
import { formatSize } from './format';

export interface ToolbarActions {
  newFolder(): void;
  /** newFile makes an untitled file with the extension (".txt") and opens it. */
  newFile(ext: string): void;
  upload(files: File[]): void;
}

/** kernelOptions are the specs as the select lists them: by display name, the default chosen. */
export function kernelOptions(
  specs: KernelSpec.ISpecModels | null | undefined,
): { name: string; label: string; selected: boolean }[] {
  if (!specs) {
    return [];
  }
  return Object.values(specs.kernelspecs)
    .filter((s): s is KernelSpec.ISpecModel => !!s)
    .map((s) => ({ name: s.name, label: s.display_name || s.name, selected: s.name === specs.default }))
    .sort((a, b) => a.label.localeCompare(b.label));
}

export class Toolbar {
  readonly element: HTMLElement;
  private readonly kernel: HTMLSelectElement;
  private readonly newNotebookButton: HTMLButtonElement;

  /** newURL is where a new notebook is made (<base>/new); dir is the directory it goes in. */
  constructor(newURL: string, dir: string, actions: ToolbarActions) {
    this.kernel = h(
      'select',
      { id: 'nb-kernel', name: 'kernel', disabled: true },
      h('option', { value: '' }, 'Loading…'),
    );
    this.newNotebookButton = h(
      'button',
      { type: 'submit', class: 'nb-primary', 'data-action': 'new-notebook', disabled: true },
      'New notebook',
    );
    const newFolder = h('button', { type: 'button', 'data-action': 'new-folder' }, 'New folder');
    newFolder.addEventListener('click', () => actions.newFolder());
    const newFile = newFileMenu((ext) => actions.newFile(ext));
    const file = h('input', { type: 'file', multiple: true, class: 'nb-upload-input', id: 'nb-upload' });
    file.addEventListener('change', () => {
      const files = Array.from(file.files ?? []);
      file.value = '';
      if (files.length) {
        actions.upload(files);
      }
    });
    // The label is the visible button; the input inside it is what keyboards and tests reach.
    const upload = h('label', { class: 'nb-upload nb-button' }, file, h('span', {}, 'Upload'));
    this.element = h(
      'div',
      { class: 'nb-toolbar' },
      // A plain GET form: the server makes the notebook (?dir=&kernel=) and sends the browser
      // on to its page, in this tab.
      h(
        'form',
        { class: 'nb-new-notebook', method: 'get', action: newURL },
        h('input', { type: 'hidden', name: 'dir', value: dir }),
        h('label', { for: 'nb-kernel' }, 'Kernel'),
        this.kernel,
        this.newNotebookButton,
      ),
      newFolder,
      newFile,
      upload,
    );
  }

  /** setKernelSpecs fills the Kernel select, the default spec selected. */
  setKernelSpecs(specs: KernelSpec.ISpecModels | null | undefined): void {
    const opts = kernelOptions(specs);
    const current = this.kernel.disabled ? '' : this.kernel.value;
    const frag = document.createDocumentFragment();
    for (const o of opts) {
      frag.append(h('option', { value: o.name, selected: current ? o.name === current : o.selected }, o.label));
    }
    if (opts.length === 0) {
      frag.append(h('option', { value: '' }, 'No kernels'));
    }
    this.kernel.replaceChildren(frag);
    this.kernel.disabled = opts.length === 0;
    this.newNotebookButton.disabled = opts.length === 0;
  }
}

/** The kinds of file "New file" makes. */
export const newFileKinds = [
  { ext: '.txt', label: 'Text file' },
  { ext: '.md', label: 'Markdown file' },
  { ext: '.py', label: 'Python file' },
];

/** newFileMenu is the "New file" button and the menu of kinds it opens (a disclosure: the
 * button says whether it is open; Escape or a click elsewhere closes it). */
function newFileMenu(make: (ext: string) => void): HTMLElement {
  const button = h(
    'button',
    { type: 'button', 'aria-expanded': 'false', 'aria-controls': 'nb-new-file-menu', 'data-action': 'new-file' },
    'New file',
  );
  const menu = h('ul', { id: 'nb-new-file-menu', class: 'nb-menu', 'aria-label': 'New file' });
  menu.hidden = true;
  const wrap = h('div', { class: 'nb-menu-wrap' }, button, menu);
  const show = (open: boolean, focusButton = false) => {
    menu.hidden = !open;
    button.setAttribute('aria-expanded', String(open));
    if (focusButton) button.focus();
  };
  for (const k of newFileKinds) {
    const item = h('button', { type: 'button', 'data-ext': k.ext }, k.label);
    item.addEventListener('click', () => {
      show(false);
      make(k.ext);
    });
    menu.append(h('li', {}, item));
  }
  button.addEventListener('click', () => {
    show(menu.hidden);
    if (!menu.hidden) menu.querySelector('button')?.focus();
  });
  wrap.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && !menu.hidden) {
      e.preventDefault();
      show(false, true);
    }
  });
  wrap.addEventListener('focusout', (e) => {
    if (!wrap.contains(e.relatedTarget as Node | null)) show(false);
  });
  return wrap;
}

/** UploadProgress is one file's line in the uploads list: its name, a progress bar, the result. */
export class UploadProgress {
  readonly element: HTMLElement;
  private readonly bar: HTMLProgressElement;
  private readonly status: HTMLElement;

  constructor(
    readonly name: string,
    readonly size: number,
  ) {
    this.bar = h('progress', { max: Math.max(size, 1), value: 0, 'aria-label': `Uploading ${name}` });
    this.status = h('span', { class: 'nb-upload-status' }, formatSize(size));
    this.element = h(
      'li',
      { class: 'nb-upload-item' },
      h('span', { class: 'nb-upload-name' }, name),
      this.bar,
      this.status,
    );
  }

  progress(sent: number): void {
    this.bar.value = sent;
    this.status.textContent = `${formatSize(sent)} of ${formatSize(this.size)}`;
  }

  done(): void {
    this.bar.value = Math.max(this.size, 1);
    this.status.textContent = 'Uploaded';
    this.element.dataset.state = 'done';
  }

  failed(reason: string): void {
    this.status.textContent = 'Failed: ' + reason;
    this.element.dataset.state = 'failed';
  }
}
