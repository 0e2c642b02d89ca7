// The notebook page's controller: keeps the cell views in step with the model, owns the
// selection and the command/edit mode, runs cells on the kernel, and saves.
import type { KernelMessage } from '@jupyterlab/services';
import { api, type Services } from '../shell/server';
import type * as nbformat from '@jupyterlab/nbformat';
import { url } from '../shell/config';
import { h, startDownload } from '../shell/dom';
import { setTitle } from '../shell/header';
import { CellView } from './cellview';
import { alert, messageOf } from '../shell/dialogs';
import { CellOps } from './cellops';
import { notebookCommands } from './commands/notebook';
import { CommandRegistry } from './commands/registry';
import { MenuBar } from './commands/menubar';
import { editorModule, loadEditor } from './editorloader';
import { FileActions } from './fileactions';
import { KernelSession, type ShownStatus } from './kernel';
import { KernelActions } from './kernelactions';
import { installKeyboard, type EditContext, type Mode } from './keyboard';
import { LazyEditors } from './lazyeditors';
import { isNew, NotebookModel, type Change } from './model';
import { DisplayRegistry } from './outputs';
import { CellRunner, runningMark } from './run';
import type { RecordedRun } from './recorded';
import { Autosave } from './save';
import { basename, Saver } from '../shell/saver';
import { CellSelection } from './selection';
import { Toolbar } from './toolbar';

export class NotebookPage {
  readonly model = new NotebookModel();
  readonly registry = new DisplayRegistry();
  readonly kernel: KernelSession;
  readonly saver: Saver<nbformat.INotebookContent>;
  readonly toolbar: Toolbar;
  readonly cellsNode: HTMLElement;
  readonly menubar: MenuBar;
  readonly commands: CommandRegistry;
  readonly ops = new CellOps(this);
  readonly kernelActions = new KernelActions(this);
  readonly file: FileActions;
  readonly sel = new CellSelection();
  /** New cells' editors show line numbers (Shift-L turned them on in all cells). */
  lineNumbers = false;
  /** The cells' views, in the model's order. */
  views: CellView[] = [];
  /** The view shown selected: after cells were inserted or removed before it, it is no longer
   * the one at sel.head, and must still be deselected. */
  private shownSelected: CellView | undefined;
  /** The views shown as part of a selection of several cells. */
  private marked = new Set<CellView>();
  private lazy: LazyEditors;
  private autosave: Autosave;
  private runner: CellRunner;

  constructor(
    readonly manager: Services,
    path: string,
  ) {
    this.kernel = new KernelSession(manager);
    this.saver = new Saver(manager, path, 'notebook');
    this.commands = new CommandRegistry(notebookCommands(this));
    this.toolbar = new Toolbar(
      (id) => {
        // A button acts on the selected cells as a key would: from the notebook.
        this.refocus();
        this.commands.run(id);
      },
      (t) => this.ops.setType(t),
      (format) => void this.download(format),
    );
    this.menubar = new MenuBar(this.commands, () => this.refocus());
    this.cellsNode = h('div', { class: 'nb-cells', role: 'list', 'aria-label': 'Cells' });
    this.lazy = new LazyEditors(() => this.views);
    this.runner = new CellRunner(
      this.kernel,
      () => this.model.markChanged(),
      (fn) => this.model.quietly(fn),
    );
    this.file = new FileActions({
      model: this.model,
      saver: this.saver,
      toolbar: this.toolbar,
      kernel: this.kernel,
      loaded: () => this.select(Math.min(this.sel.head, this.views.length - 1), false),
      renamed: () => this.setTitle(),
      refocus: () => this.refocus(),
      showRun: (run) => this.showRun(run),
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
    installKeyboard(document, this);
  }

  async connectKernel(): Promise<void> {
    const ks = this.model.metadata.kernelspec as { name?: string } | undefined;
    try {
      await this.kernel.connect(this.path, basename(this.path), ks?.name);
      void this.followRecordedRuns();
      void this.noteKernel();
    } catch (err) {
      this.onStatus('dead');
      void alert('No kernel', 'The kernel could not be started: ' + messageOf(err));
    }
  }

  /** followRecordedRuns shows the cells the server recorded as still running (a page that
   * ran them was closed) as running, with what their runs send from now on. It follows at
   * once, not to miss what comes, then asks the kernel's own state (a session's list has its
   * resource's, which lags): a mark found while the kernel is not busy is of a run that
   * ended unseen, and goes. */
  private async followRecordedRuns(): Promise<void> {
    const followed: CellView[] = [];
    for (const v of this.views) {
      const id = runningMark(v.cell.metadata);
      if (id !== undefined) {
        this.followRun(v, id, false);
        followed.push(v);
      }
    }
    const k = this.kernel.kernel;
    if (followed.length === 0 || !k) return;
    let busy = true;
    try {
      busy =
        (await api<{ execution_state?: string }>(`api/kernels/${encodeURIComponent(k.id)}`)).execution_state === 'busy';
    } catch {
      // Unknown: the marks stay until the kernel says it is idle.
    }
    if (!busy) {
      for (const v of followed) this.unfollowRun(v);
    }
  }

  /** followRun shows the run of a cell that the kernel's agent runs (its execute_request's
   * msgId): the cell is running until the kernel is idle after it, with its outputs as they
   * come; fresh clears the cell's outputs as the run starts. */
  followRun(v: CellView, msgId: string, fresh: boolean): void {
    this.runner.follow(v, msgId, (l) => this.kernel.follow(l), fresh);
  }

  /** unfollowRun stops following a cell's run that will not come. */
  unfollowRun(v: CellView): void {
    this.runner.unfollow(v);
  }

  /** noteKernel shows the kernel's name and writes its spec and language into the notebook's
   * metadata (as Jupyter does: the file then says which kernel and language it is for). */
  async noteKernel(): Promise<void> {
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
      select: (view, edit, extend) =>
        extend && !edit ? this.selectRange(this.sel.anchor, view.getIndex()) : this.select(view.getIndex(), edit),
      changed: () => this.model.markChanged(),
      trusted: () => true,
    });
    v.node.setAttribute('role', 'listitem');
    v.lineNumbers = this.lineNumbers;
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
      case 'source':
        this.views[c.index].refreshSource();
        return;
    }
    for (let i = from; i < this.views.length; i++) {
      this.views[i].setIndex(i);
    }
    this.sel.clamp(this.views.length);
  }

  private destroyView(v: CellView): void {
    this.lazy.unobserve(v);
    v.destroy();
  }

  /** current is the cursor cell's view (the one selected, that keys act on). */
  get current(): CellView | undefined {
    return this.views[this.sel.head];
  }

  /** select makes cell i the selected one (and only it), in edit mode or command mode. */
  select(i: number, edit: boolean, focus = true): void {
    i = Math.max(0, Math.min(this.views.length - 1, i));
    this.sel.set(i);
    this.showCursor(i, edit, focus);
  }

  /** selectRange selects the cells from anchor to head, in command mode; head is the cursor. */
  selectRange(anchor: number, head: number): void {
    const n = this.views.length;
    this.sel.anchor = Math.max(0, Math.min(n - 1, anchor));
    this.sel.extendTo(Math.max(0, Math.min(n - 1, head)));
    this.showCursor(this.sel.head, false, true);
  }

  private showCursor(i: number, edit: boolean, focus: boolean): void {
    this.showMarks();
    const prev = this.shownSelected;
    const v = this.views[i];
    if (prev && prev !== v) {
      prev.setSelected(false);
      prev.leaveEdit();
    }
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

  /** showMarks shows which cells a selection of several holds. */
  private showMarks(): void {
    const now = new Set<CellView>();
    if (this.sel.count > 1) {
      for (let i = this.sel.from; i <= this.sel.to; i++) now.add(this.views[i]);
    }
    for (const v of this.marked) if (!now.has(v)) v.setMarked(false);
    for (const v of now) if (!this.marked.has(v)) v.setMarked(true);
    this.marked = now;
  }

  /** refocus gives the focus back to the notebook (after a dialog or a button). */
  refocus(): void {
    if (this.sel.count > 1) this.selectRange(this.sel.anchor, this.sel.head);
    else this.select(this.sel.head, false);
  }

  /** command runs a command by id; false when it did not apply. */
  command(id: string): boolean {
    return this.commands.run(id);
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

  editContext(): EditContext {
    const e = this.current?.editor;
    const m = editorModule();
    return e && m ? m.editContext(e) : {};
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

  /** ensureKernel connects a kernel unless the page has a live one. */
  async ensureKernel(): Promise<void> {
    if (this.kernel.session && this.kernel.status === 'dead') {
      // The kernel is gone (shut down elsewhere, or its connection given up): start anew.
      await this.kernel.shutdown().catch(() => undefined);
    }
    if (!this.kernel.session) {
      await this.connectKernel();
    }
  }

  /** runCells runs cells in order: markdown renders, code goes to the kernel (all requests
   * are sent at once; the kernel queues them, and stops after an error). */
  async runCells(indices: number[]): Promise<void> {
    const views = indices.map((i) => this.views[i]).filter((v): v is CellView => !!v);
    if (views.some((v) => v.cell.type === 'code' && v.cell.source.trim() !== '')) {
      await this.ensureKernel();
    }
    const done: Promise<void>[] = [];
    for (const v of views) {
      done.push(this.runner.run(v));
    }
    await Promise.all(done);
  }

  // ---- Saving ----

  /** save saves the notebook, asking first if the file changed on the server. */
  save(force = false, quiet = false): Promise<void> {
    return this.file.save(force, quiet);
  }

  /** showRun puts a run the server recorded while the page was away into its cell: its
   * outputs, execution count and timing record (see recorded.ts); not into a cell that is
   * running here. */
  showRun(run: RecordedRun): void {
    const v = this.views[run.index];
    // A cell running here is being run again: its new run replaces what the server has.
    if (!v || v.isRunning) return;
    const md = v.cell.metadata as Record<string, unknown>;
    if (run.execution === undefined) {
      delete md.execution;
    } else {
      md.execution = run.execution;
    }
    v.setRunning(null);
    v.outputs?.clear();
    for (const o of run.outputs) {
      v.outputs?.add(o);
    }
    v.setExecutionCount(run.executionCount);
  }

  /** reload reads the file again (after a conflict or a revert). */
  reload(): Promise<void> {
    return this.file.reload();
  }
}
