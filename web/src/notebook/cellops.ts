// What the notebook's commands do to cells: on the selected cells (one, or a range chosen
// with Shift-Up/Down or Shift-click) — run, insert, delete, cut, copy, paste, move, merge,
// split, change type, clear outputs, line numbers — and moving the selection.
import type * as nbformat from '@jupyterlab/nbformat';
import { renderOutput } from '../render/index';
import { h } from '../shell/dom';
import type { CellView } from './cellview';
import { editorModule } from './editorloader';
import { makeCell, type CellType } from './model';
import type { NotebookPage } from './notebook';

export class CellOps {
  constructor(private p: NotebookPage) {}

  private get sel() {
    return this.p.sel;
  }

  private get model() {
    return this.p.model;
  }

  private range(): number[] {
    const out = [];
    for (let i = this.sel.from; i <= this.sel.to; i++) out.push(i);
    return out;
  }

  private editing(): boolean {
    return this.p.mode() === 'edit';
  }

  // ---- Running ----

  /** run runs the selected cells and stays (Ctrl-Enter). */
  run(): void {
    void this.p.runCells(this.range());
    this.p.selectRange(this.sel.anchor, this.sel.head);
  }

  /** runAndAdvance runs the selected cells and selects the one below them, made if need be
   * (in edit mode, as Jupyter: the next thing is to type). */
  runAndAdvance(): void {
    const last = this.sel.to;
    void this.p.runCells(this.range());
    if (last === this.p.views.length - 1) {
      this.model.insert(last + 1, makeCell('code'));
      this.p.select(last + 1, true);
    } else {
      this.p.select(last + 1, false);
    }
  }

  /** runInsertBelow runs the selected cells and edits a new cell below them. */
  runInsertBelow(): void {
    const last = this.sel.to;
    void this.p.runCells(this.range());
    this.model.insert(last + 1, makeCell('code'));
    this.p.select(last + 1, true);
  }

  runAll(): Promise<void> {
    this.p.refocus();
    return this.p.runCells(this.p.views.map((_, j) => j));
  }

  runAbove(): Promise<void> {
    const i = this.sel.head;
    this.p.refocus();
    return this.p.runCells(this.p.views.slice(0, i).map((_, j) => j));
  }

  runBelow(): Promise<void> {
    const i = this.sel.head;
    this.p.refocus();
    return this.p.runCells(this.p.views.slice(i).map((_, j) => i + j));
  }

  // ---- Cells ----

  insert(below: boolean): void {
    const at = below ? this.sel.to + 1 : this.sel.from;
    this.model.insert(at, makeCell('code'));
    this.p.select(at, false);
  }

  /** remove deletes the selected cells (Z brings them back, all of them). */
  remove(): void {
    const from = this.sel.from;
    this.model.remove(from, this.sel.count);
    this.p.select(Math.min(from, this.p.views.length - 1), false);
  }

  cut(): void {
    const from = this.sel.from;
    this.model.cut(from, this.sel.count);
    this.p.select(Math.min(from, this.p.views.length - 1), false);
  }

  copy(): void {
    this.model.copy(this.sel.from, this.sel.count);
  }

  paste(below: boolean): void {
    const at = below ? this.sel.to + 1 : this.sel.from;
    if (this.model.paste(at) > 0) {
      this.p.select(at, false);
    }
  }

  undoDelete(): void {
    const at = this.model.undoDelete();
    if (at >= 0) this.p.select(at, false);
  }

  /** move moves the selected cells one place up or down, still selected. */
  move(delta: -1 | 1): void {
    const { from, count, anchor, head } = this.sel;
    const to = this.model.move(from, delta, count);
    const d = to - from;
    this.p.selectRange(anchor + d, head + d);
  }

  /** merge merges the selected cells, or the cell with the one below it. */
  merge(): void {
    const count = this.sel.count > 1 ? this.sel.count : 2;
    const from = this.sel.from;
    if (from + count > this.p.views.length) return;
    this.model.merge(from, count);
    this.p.select(from, false);
  }

  /** split cuts the cell being edited at the cursor (and at the ends of a selection). */
  split(): boolean {
    const v = this.p.current;
    const m = editorModule();
    if (!v?.editor || !m) return false;
    const s = v.editor.state.selection.main;
    const i = this.sel.head;
    const n = this.model.split(i, [s.from, s.to]);
    if (n < 2) return true;
    this.p.select(i + n - 1, true);
    const e = this.p.views[i + n - 1]?.editor;
    e?.dispatch({ selection: { anchor: 0 } });
    return true;
  }

  setType(t: CellType): void {
    const editing = this.editing();
    const { anchor, head } = this.sel;
    for (const i of this.range()) {
      this.model.setType(i, t);
      this.p.views[i]?.unrender();
    }
    if (anchor === head) this.p.select(head, editing);
    else this.p.selectRange(anchor, head);
  }

  /** clearOutputs clears the outputs and counts of the selected cells, or of all. */
  clearOutputs(all: boolean): void {
    const views = all ? this.p.views : this.range().map((i) => this.p.views[i]);
    for (const v of views) {
      if (v?.cell.type !== 'code') continue;
      v.outputs?.clear();
      v.setExecutionCount(null);
    }
    this.model.markChanged();
  }

  /** toggleLineNumbers shows or hides line numbers in the selected cells, or in all (on in
   * all unless all have them). */
  toggleLineNumbers(all: boolean): void {
    const views = all
      ? this.p.views
      : this.range()
          .map((i) => this.p.views[i])
          .filter((v) => !!v);
    const on = !views.every((v) => v.lineNumbers);
    if (all) this.p.lineNumbers = on;
    for (const v of views) v.setLineNumbers(on);
  }

  // ---- Selection ----

  /** step selects the cell above or below; in edit mode the cursor goes to its near end.
   * False at the ends in edit mode, so that the key moves the cursor as usual. */
  step(delta: -1 | 1): boolean {
    const editing = this.editing();
    const i = this.sel.head + delta;
    if (i < 0 || i >= this.p.views.length) return !editing;
    this.p.select(i, editing);
    if (editing) {
      const e = this.p.views[i]?.editor;
      e?.dispatch({ selection: { anchor: delta < 0 ? e.state.doc.length : 0 } });
    }
    return true;
  }

  /** extend moves the cursor cell and keeps where the selection began (Shift-Up/Down). */
  extend(delta: -1 | 1): void {
    const i = this.sel.head + delta;
    if (i < 0 || i >= this.p.views.length) return;
    this.p.selectRange(this.sel.anchor, i);
  }

  selectAll(): void {
    this.p.selectRange(0, this.p.views.length - 1);
  }

  // ---- Editing ----

  complete(): boolean {
    const v = this.p.current;
    if (!v?.editor || v.cell.type !== 'code') return false;
    editorModule()?.complete(v.editor);
    return true;
  }

  inspect(): boolean {
    const v = this.p.current;
    if (!v?.editor || v.cell.type !== 'code') return false;
    void this.showInspect(v);
    return true;
  }

  private async showInspect(v: CellView): Promise<void> {
    const m = editorModule();
    if (!v.editor || !m) return;
    const { code, pos } = m.cursorCode(v.editor);
    const data = await this.p.kernel.inspect(code, pos);
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
}
