// The notebook page's controller: keeps the cell views in step with the model, owns the
// selection and the command/edit mode, runs cells on the kernel, and saves.
import type { KernelMessage } from '@jupyterlab/services';
import type { Services } from '../shell/server';
import type * as nbformat from '@jupyterlab/nbformat';
import { renderOutput } from '../render/index';
import { config, url } from '../shell/config';
import { h, startDownload } from '../shell/dom';
import { setTitle } from '../shell/header';
import { CellView } from './cellview';
import { alert, choose, messageOf } from '../shell/dialogs';
import { editorModule, loadEditor } from './editorloader';
import { FileActions } from './fileactions';
import { KernelSession, type ShownStatus } from './kernel';
import { installKeyboard, type Command, type EditContext, type Mode } from './keyboard';
import { LazyEditors } from './lazyeditors';
import { isNew, makeCell, NotebookModel, type CellType, type Change } from './model';
import { DisplayRegistry } from './outputs';
import { CellRunner } from './run';
import { Autosave } from './save';
import { basename, Saver } from '../shell/saver';
import { Toolbar, type Action } from './toolbar';

export class NotebookPage {
  readonly model = new NotebookModel();
  readonly registry = new DisplayRegistry();
  readonly kernel: KernelSession;
  readonly saver: Saver<nbformat.INotebookContent>;
  readonly toolbar: Toolbar;
  readonly cellsNode: HTMLElement;
  private views: CellView[] = [];
  private selected = 0;
  /** The view shown selected: after cells were inserted or removed before it, it is no longer
   * the one at this.selected, and must still be deselected. */
  private shownSelected: CellView | undefined;
  private lazy: LazyEditors;
  private autosave: Autosave;
  private runner: CellRunner;
  private file: FileActions;

  constructor(
    private manager: Services,
    path: string,
  ) {
    this.kernel = new KernelSession(manager);
    this.saver = new Saver(manager, path, 'notebook');
    this.toolbar = new Toolbar(
      (a) => void this.action(a),
      (t) => this.setType(t),
      (format) => void this.download(format),
    );
    this.cellsNode = h('div', { class: 'nb-cells', role: 'list', 'aria-label': 'Cells' });
    this.lazy = new LazyEditors(() => this.views);
    this.runner = new CellRunner(this.kernel, () => this.model.markChanged());
    this.file = new FileActions({
      model: this.model,
      saver: this.saver,
      toolbar: this.toolbar,
      kernel: this.kernel,
      loaded: () => this.select(Math.min(this.selected, this.views.length - 1), false),
      renamed: () => this.setTitle(),
      refocus: () => this.refocus(),
    });
    this.model.onChange((c) => this.onModelChange(c));
    this.model.onDirty((d) => {
      this.toolbar.setDirty(d);
      document.body.dataset.dirty = String(d);
    });
    document.body.dataset.dirty = 'false';
    document.body.dataset.kernelStatus = 'starting';
    this.kernel.onStatus((s) => this.onStatus(s));
    this.kernel.onIOPub((m) => this.onIOPub(m));
    this.kernel.onRestart(() => {
      for (const v of this.views) {
        v.outputs?.cancelInput();
      }
    });
    this.autosave = new Autosave(
      () => this.model.dirty,
      () => this.save(false, true),
    );
  }

  get path(): string {
    return this.saver.path;
  }

  // ---- Loading ----

  /** load reads the notebook and shows it; then connects the kernel. */
  async load(): Promise<void> {
    void loadEditor().then(() => this.lazy.kick());
    const nb = await this.saver.load();
    this.model.load(nb);
    this.setTitle();
    // A new notebook takes typing in its first cell at once, as Notebook does: in command
    // mode its first keystrokes would be commands ("r" makes the cell raw).
    this.select(0, isNew(nb), isNew(nb));
    this.autosave.start();
    window.addEventListener('beforeunload', (e) => {
      if (this.model.dirty) {
        e.preventDefault();
        e.returnValue = '';
      }
    });
    installKeyboard(document, {
      mode: () => this.mode(),
      editContext: () => this.editContext(),
      run: (c) => this.command(c),
    });
  }

  async connectKernel(): Promise<void> {
    const ks = this.model.metadata.kernelspec as { name?: string } | undefined;
    try {
      await this.kernel.connect(this.path, basename(this.path), ks?.name);
      void this.noteKernel();
    } catch (err) {
      this.onStatus('dead');
      void alert('No kernel', 'The kernel could not be started: ' + messageOf(err));
    }
  }

  /** noteKernel shows the kernel's name and writes its spec and language into the notebook's
   * metadata (as Jupyter does: the file then says which kernel and language it is for). */
  private async noteKernel(): Promise<void> {
    const k = this.kernel.kernel;
    if (!k) return;
    try {
      const [spec, info] = await Promise.all([k.spec, k.info]);
      if (spec) {
        this.toolbar.setKernelName(spec.display_name);
        this.model.metadata.kernelspec = { name: spec.name, display_name: spec.display_name, language: spec.language };
      }
      if (info?.language_info) {
        this.model.metadata.language_info = info.language_info;
      }
    } catch {
      // the names are a nicety
    }
  }

  private setTitle(): void {
    const name = basename(this.path);
    setTitle(name, name.replace(/\.ipynb$/i, ''));
  }

  private onStatus(s: ShownStatus): void {
    this.toolbar.setStatus(s);
    document.body.dataset.kernelStatus = s === 'no kernel' ? 'none' : s;
  }

  private onIOPub(m: KernelMessage.IIOPubMessage): void {
    if (m.header.msg_type !== 'update_display_data') {
      return;
    }
    const c = m.content as KernelMessage.IUpdateDisplayDataMsg['content'];
    const id = (c.transient as { display_id?: string } | undefined)?.display_id;
    if (id) {
      this.registry.update(id, c.data, c.metadata ?? {});
    }
  }

  // ---- Views ----

  private makeView(i: number): CellView {
    const v = new CellView(this.model.cells[i], i, {
      language: () => this.model.language,
      registry: this.registry,
      help: () => (this.kernel.kernel ? this.kernel : null),
      select: (view, edit) => this.select(view.getIndex(), edit),
      changed: () => this.model.markChanged(),
      trusted: () => true,
    });
    v.node.setAttribute('role', 'listitem');
    this.lazy.observe(v);
    return v;
  }

  private onModelChange(c: Change): void {
    let from = 0;
    switch (c.kind) {
      case 'reset':
        this.views.forEach((v) => this.destroyView(v));
        this.views = this.model.cells.map((_, i) => this.makeView(i));
        this.cellsNode.replaceChildren(...this.views.map((v) => v.node));
        break;
      case 'insert': {
        const made = [];
        for (let i = c.index; i < c.index + c.count; i++) {
          made.push(this.makeView(i));
        }
        const before = this.views[c.index]?.node ?? null;
        for (const v of made) {
          this.cellsNode.insertBefore(v.node, before);
        }
        this.views.splice(c.index, 0, ...made);
        from = c.index;
        break;
      }
      case 'remove':
        this.views.splice(c.index, c.count).forEach((v) => this.destroyView(v));
        from = c.index;
        break;
      case 'move': {
        const [v] = this.views.splice(c.from, 1);
        this.views.splice(c.to, 0, v);
        this.cellsNode.insertBefore(v.node, this.views[c.to + 1]?.node ?? null);
        from = Math.min(c.from, c.to);
        break;
      }
      case 'type':
        this.views[c.index].build();
        from = c.index;
        break;
    }
    for (let i = from; i < this.views.length; i++) {
      this.views[i].setIndex(i);
    }
    if (this.selected >= this.views.length) {
      this.selected = this.views.length - 1;
    }
  }

  private destroyView(v: CellView): void {
    this.lazy.unobserve(v);
    v.destroy();
  }

  private get current(): CellView | undefined {
    return this.views[this.selected];
  }

  /** select makes cell i the selected one, in edit mode or command mode. */
  select(i: number, edit: boolean, focus = true): void {
    i = Math.max(0, Math.min(this.views.length - 1, i));
    const prev = this.shownSelected;
    const v = this.views[i];
    if (prev && prev !== v) {
      prev.setSelected(false);
      prev.leaveEdit();
    }
    this.selected = i;
    this.shownSelected = v;
    if (!v) {
      return;
    }
    v.setSelected(true);
    this.toolbar.setCellType(v.cell.type);
    if (edit) {
      v.edit();
    } else {
      v.leaveEdit();
      if (focus) {
        v.node.focus({ preventScroll: true });
      }
    }
    if (focus) {
      v.node.scrollIntoView?.({ block: 'nearest' });
    }
  }

  /** mode is where the focus is: in a cell's editor (edit), on the notebook (command), or in
   * some other control (toolbar, an input field, a dialog). */
  mode(): Mode {
    const a = document.activeElement;
    if (!a || a === document.body) {
      return 'command';
    }
    if (!this.cellsNode.contains(a)) {
      return 'other';
    }
    if (a.closest('.cm-editor') || a.matches('.nb-editor-fallback')) {
      return 'edit';
    }
    // A cell, or something in it that takes no keys of its own (e.g. an output's scroll box,
    // which Chromium focuses on a click).
    return a.matches('input, textarea, select, button, a[href], [contenteditable]') ? 'other' : 'command';
  }

  private editContext(): EditContext {
    const e = this.current?.editor;
    const m = editorModule();
    return e && m ? m.editContext(e) : {};
  }

  // ---- Commands (keyboard and toolbar) ----

  /** command runs a keyboard command; false lets the key go on. */
  command(c: Command): boolean {
    const i = this.selected;
    const v = this.current;
    const editing = this.mode() === 'edit';
    switch (c) {
      case 'run-select-next':
        return this.runAndAdvance();
      case 'run':
        void this.runCells([i]);
        this.select(i, false);
        return true;
      case 'run-insert-below':
        void this.runCells([i]);
        this.model.insert(i + 1, makeCell('code'));
        this.select(i + 1, true);
        return true;
      case 'command-mode':
        if (v?.cell.type === 'markdown' && v.cell.source.trim() !== '') {
          // As Jupyter: leaving a markdown cell's editor keeps it unrendered until run.
        }
        this.select(i, false);
        return true;
      case 'edit-mode':
        this.select(i, true);
        return true;
      case 'insert-above':
        this.model.insert(i, makeCell('code'));
        this.select(i, false);
        return true;
      case 'insert-below':
        this.model.insert(i + 1, makeCell('code'));
        this.select(i + 1, false);
        return true;
      case 'delete':
        this.model.remove(i);
        this.select(Math.min(i, this.views.length - 1), false);
        return true;
      case 'to-markdown':
      case 'to-code':
      case 'to-raw':
        this.setType(c === 'to-markdown' ? 'markdown' : c === 'to-code' ? 'code' : 'raw');
        return true;
      case 'cut':
        this.model.cut(i);
        this.select(Math.min(i, this.views.length - 1), false);
        return true;
      case 'copy':
        this.model.copy(i);
        return true;
      case 'paste':
        if (this.model.paste(i + 1) > 0) {
          this.select(i + 1, false);
        }
        return true;
      case 'select-prev':
        if (i === 0) return !editing;
        this.select(i - 1, editing);
        if (editing) this.cursorTo(this.selected, 'end');
        return true;
      case 'select-next':
        if (i >= this.views.length - 1) return !editing;
        this.select(i + 1, editing);
        if (editing) this.cursorTo(this.selected, 'start');
        return true;
      case 'undo-delete': {
        const at = this.model.undoDelete();
        if (at >= 0) this.select(at, false);
        return true;
      }
      case 'move-up':
        this.select(this.model.move(i, -1), false);
        return true;
      case 'move-down':
        this.select(this.model.move(i, 1), false);
        return true;
      case 'save':
        void this.save();
        return true;
      case 'complete':
        if (!v?.editor || v.cell.type !== 'code') return false;
        editorModule()?.complete(v.editor);
        return true;
      case 'inspect':
        if (!v?.editor || v.cell.type !== 'code') return false;
        void this.inspect(v);
        return true;
      case 'interrupt':
        void this.kernel.interrupt();
        return true;
      case 'restart':
        void this.restart(false);
        return true;
    }
    return false;
  }

  private cursorTo(i: number, where: 'start' | 'end'): void {
    const e = this.views[i]?.editor;
    if (e) {
      e.dispatch({ selection: { anchor: where === 'start' ? 0 : e.state.doc.length } });
    }
  }

  private runAndAdvance(): boolean {
    const i = this.selected;
    void this.runCells([i]);
    if (i === this.views.length - 1) {
      this.model.insert(i + 1, makeCell('code'));
      this.select(i + 1, true);
    } else {
      this.select(i + 1, false);
    }
    return true;
  }

  private setType(t: CellType): void {
    const i = this.selected;
    const wasEditing = this.mode() === 'edit';
    this.model.setType(i, t);
    this.views[i]?.unrender();
    this.select(i, wasEditing);
  }

  private refocus(): void {
    this.select(this.selected, false);
  }

  /** action runs a toolbar button's action. */
  async action(a: Action): Promise<void> {
    const i = this.selected;
    switch (a) {
      case 'save':
        await this.save();
        return;
      case 'insert-below':
        this.command('insert-below');
        return;
      case 'cut':
      case 'copy':
      case 'paste':
      case 'move-up':
      case 'move-down':
        this.command(a);
        this.refocus();
        return;
      case 'run':
        this.runAndAdvance();
        this.refocus();
        return;
      case 'run-all':
        this.refocus();
        await this.runCells(this.views.map((_, j) => j));
        return;
      case 'run-above':
        this.refocus();
        await this.runCells(this.views.slice(0, i).map((_, j) => j));
        return;
      case 'run-below':
        this.refocus();
        await this.runCells(this.views.slice(i).map((_, j) => i + j));
        return;
      case 'interrupt':
        await this.kernel.interrupt();
        return;
      case 'restart':
        await this.restart(false);
        return;
      case 'restart-run-all':
        await this.restart(true);
        return;
      case 'shutdown':
        await this.shutdown();
        return;
      case 'checkpoint':
        await this.file.checkpoint();
        return;
      case 'revert':
        await this.file.revert();
        return;
      case 'rename':
        await this.file.rename();
        return;
      case 'copy-notebook':
      case 'print':
        // Both show the file: save first what is only on the page.
        if (this.model.dirty) {
          await this.save();
        }
        window.open(url(config().notebookId ?? '', a === 'print' ? 'print' : 'copy'), '_blank', 'noopener');
        return;
    }
  }

  /** download saves what is only on the page, then downloads the notebook in format (an
   * exporter of /nbconvert), as an attachment. */
  async download(format: string): Promise<void> {
    if (this.model.dirty) {
      await this.save();
    }
    startDownload(url('nbconvert', format, this.path) + '?download=true');
  }

  // ---- Running ----

  /** runCells runs cells in order: markdown renders, code goes to the kernel (all requests
   * are sent at once; the kernel queues them, and stops after an error). */
  async runCells(indices: number[]): Promise<void> {
    const views = indices.map((i) => this.views[i]).filter((v): v is CellView => !!v);
    if (views.some((v) => v.cell.type === 'code' && v.cell.source.trim() !== '')) {
      if (this.kernel.session && this.kernel.status === 'dead') {
        // The kernel is gone (shut down elsewhere, or its connection given up): start anew.
        await this.kernel.shutdown().catch(() => undefined);
      }
      if (!this.kernel.session) {
        await this.connectKernel();
      }
    }
    const done: Promise<void>[] = [];
    for (const v of views) {
      done.push(this.runner.run(v));
    }
    await Promise.all(done);
  }

  private async inspect(v: CellView): Promise<void> {
    if (!v.editor) return;
    const m = editorModule();
    if (!m) return;
    const { code, pos } = m.cursorCode(v.editor);
    const data = await this.kernel.inspect(code, pos);
    if (!data) {
      v.showInspect(h('p', {}, 'No information.'));
      return;
    }
    v.showInspect(
      renderOutput(
        { output_type: 'display_data', data: data as nbformat.IMimeBundle, metadata: {} },
        { trusted: true },
      ),
    );
  }

  private async restart(runAll: boolean): Promise<void> {
    const ok = await choose(
      runAll ? 'Restart and run all?' : 'Restart the kernel?',
      'The kernel’s variables will be lost.',
      [
        { value: 'cancel', label: 'Cancel' },
        { value: 'restart', label: runAll ? 'Restart and run all' : 'Restart', primary: true },
      ],
    );
    if (ok !== 'restart') {
      this.refocus();
      return;
    }
    this.refocus();
    if (!this.kernel.session) {
      await this.connectKernel();
    } else {
      try {
        await this.kernel.restart();
      } catch {
        // A kernel that is gone cannot restart: start a new one for the notebook instead.
        await this.kernel.shutdown().catch(() => undefined);
        await this.connectKernel();
      }
    }
    for (const v of this.views) {
      v.setRunning(null);
    }
    if (runAll) {
      await this.kernel.whenIdle(60000);
      await this.runCells(this.views.map((_, j) => j));
    }
  }

  private async shutdown(): Promise<void> {
    const ok = await choose(
      'Shut down the kernel?',
      'The kernel’s variables will be lost; running a cell starts a new kernel.',
      [
        { value: 'cancel', label: 'Cancel' },
        { value: 'shutdown', label: 'Shut down', primary: true },
      ],
    );
    this.refocus();
    if (ok !== 'shutdown') return;
    try {
      await this.kernel.shutdown();
    } catch (err) {
      void alert('Shut down failed', messageOf(err));
    }
    for (const v of this.views) {
      v.setRunning(null);
    }
  }

  // ---- Saving ----

  /** save saves the notebook, asking first if the file changed on the server. */
  save(force = false, quiet = false): Promise<void> {
    return this.file.save(force, quiet);
  }

  /** reload reads the file again (after a conflict or a revert). */
  reload(): Promise<void> {
    return this.file.reload();
  }
}
