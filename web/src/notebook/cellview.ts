// A cell's view: prompt, input (static highlighted code until an editor is needed, or
// rendered markdown when not editing) and the output area. Editors are made lazily (when the
// cell comes into view, or is focused), so a long notebook shows at once.
import type { EditorView } from '@codemirror/view';
import { highlightCode, renderMarkdown } from '../render/index';
import { h } from '../shell/dom';
import type { KernelHelp } from './editor';
import { editorModule, loadEditor } from './editorloader';
import type { CellModel } from './model';
import { DisplayRegistry, OutputArea } from './outputs';

export interface CellHost {
  language: () => string;
  registry: DisplayRegistry;
  help: () => KernelHelp | null;
  /** The cell was clicked (extend: with Shift) or its editor focused. */
  select: (v: CellView, edit: boolean, extend?: boolean) => void;
  /** The cell's source or outputs changed. */
  changed: () => void;
  /** Whether the notebook's markup is trusted (it is sanitised either way). */
  trusted: () => boolean;
}

const TYPE_NAME = { code: 'code', markdown: 'markdown', raw: 'raw' } as const;

export class CellView {
  readonly node: HTMLElement;
  readonly cell: CellModel;
  private host: CellHost;
  private prompt: HTMLElement;
  private inputArea: HTMLElement;
  private editorHost: HTMLElement;
  private staticCode: HTMLElement | null = null;
  private rendered: HTMLElement | null = null;
  editor: EditorView | null = null;
  outputs: OutputArea | null = null;
  private index = 0;
  private running: 'queued' | 'running' | null = null;
  /** A markdown cell shows its editor (not its rendering). */
  private editingMarkdown = false;
  /** edit() was called before the editor module arrived. */
  private wantFocus = false;
  /** A plain text box that takes the cell's typing until the editor arrives, so that no
   * keystroke is lost to a command (or to nothing) in between. */
  private fallback: HTMLTextAreaElement | null = null;
  readonly inspectPanel: HTMLElement;
  /** The editor shows line numbers (L). */
  lineNumbers = false;

  constructor(cell: CellModel, index: number, host: CellHost) {
    this.cell = cell;
    this.host = host;
    this.index = index;
    this.prompt = h('div', { class: 'nb-prompt', 'aria-hidden': 'true' });
    this.editorHost = h('div', { class: 'nb-editor' });
    this.inspectPanel = h('div', { class: 'nb-inspect', role: 'status', hidden: true });
    this.inputArea = h('div', { class: 'nb-input' }, this.editorHost, this.inspectPanel);
    this.node = h(
      'div',
      { class: 'nb-cell', tabindex: '-1' },
      h('div', { class: 'nb-cell-row' }, this.prompt, this.inputArea),
    );
    this.node.addEventListener('mousedown', (e) => this.onMouseDown(e));
    this.node.addEventListener('dblclick', () => {
      if (this.cell.type === 'markdown' && !this.editingMarkdown) {
        this.host.select(this, true);
      }
    });
    this.build();
  }

  /** build (re)draws the input and outputs for the cell's type. */
  build(): void {
    const c = this.cell;
    this.node.dataset.cellType = c.type;
    this.node.classList.toggle('nb-code-cell', c.type === 'code');
    this.node.classList.toggle('nb-markdown-cell', c.type === 'markdown');
    this.node.classList.toggle('nb-raw-cell', c.type === 'raw');
    if (this.editor) {
      this.editor.destroy();
      this.editor = null;
    }
    this.editorHost.replaceChildren();
    this.staticCode = null;
    this.rendered?.remove();
    this.rendered = null;
    this.outputs?.node.remove();
    this.outputs = null;
    if (c.type === 'code') {
      this.outputs = new OutputArea(c.outputs, { registry: this.host.registry, onChange: () => this.host.changed() });
      this.node.append(this.outputs.node);
    }
    if (c.type === 'markdown' && !this.editingMarkdown) {
      this.showRendered();
    } else {
      this.showStatic();
    }
    this.setIndex(this.index);
  }

  private showStatic(): void {
    this.editorHost.hidden = false;
    if (this.editor) {
      return;
    }
    const lang = this.cell.type === 'code' ? this.host.language() : this.cell.type === 'markdown' ? 'markdown' : 'text';
    let pre: HTMLElement;
    try {
      pre = highlightCode(this.cell.source, lang);
    } catch {
      pre = h('pre', { class: 'nb-code' }, this.cell.source);
    }
    pre.classList.add('nb-static-code');
    this.staticCode = pre;
    this.editorHost.replaceChildren(pre);
  }

  private showRendered(): void {
    this.editorHost.hidden = true;
    let el: HTMLElement;
    const src = this.cell.source;
    if (src.trim() === '') {
      el = h(
        'div',
        { class: 'nb-markdown nb-markdown-empty' },
        'Empty markdown cell; double-click or press Enter to edit.',
      );
    } else {
      try {
        el = renderMarkdown(src, { trusted: this.host.trusted(), attachments: this.cell.attachments });
      } catch {
        el = h('pre', { class: 'nb-markdown' }, src);
      }
    }
    el.classList.add('nb-rendered');
    this.rendered?.remove();
    this.rendered = el;
    this.inputArea.insertBefore(el, this.inspectPanel);
  }

  private onMouseDown(e: MouseEvent): void {
    const t = e.target as HTMLElement;
    if (t.closest('.nb-outputs input, .nb-outputs a, .nb-outputs button, .nb-outputs textarea, .nb-outputs select')) {
      return;
    }
    if (e.shiftKey && !this.node.classList.contains('nb-editing')) {
      e.preventDefault(); // Shift-click extends the selection of cells
      this.host.select(this, false, true);
      return;
    }
    if (this.staticCode && this.staticCode.contains(t)) {
      // Make the editor where the static code was, with the cursor where the click was.
      e.preventDefault();
      const v = this.ensureEditor();
      const pos = v ? v.posAtCoords({ x: e.clientX, y: e.clientY }) : null;
      this.host.select(this, true);
      if (v && pos !== null) {
        v.dispatch({ selection: { anchor: pos } });
      }
      return;
    }
    if (this.editor && this.editor.dom.contains(t)) {
      return; // the editor's own; its focus selects the cell
    }
    this.host.select(this, false);
  }

  /** ensureEditor makes the cell's editor if it has none yet; null (and made later) while
   * the editor module is still loading. */
  ensureEditor(): EditorView | null {
    if (this.editor) {
      return this.editor;
    }
    const m = editorModule();
    if (!m) {
      void loadEditor().then(() => {
        if (!this.node.isConnected) return;
        this.ensureEditor();
        if (this.wantFocus) {
          this.wantFocus = false;
          this.edit();
        }
      });
      return null;
    }
    const { createEditor } = m;
    const lang = this.cell.type === 'code' ? this.host.language() : this.cell.type === 'markdown' ? 'markdown' : 'text';
    // What was typed into the stand-in box is the cell's source already; its cursor and its
    // focus go over to the editor.
    const box = this.fallback;
    const typing = box !== null && document.activeElement === box;
    const at = box ? [box.selectionStart, box.selectionEnd] : null;
    this.fallback = null;
    this.editorHost.replaceChildren();
    this.staticCode = null;
    this.editor = createEditor({
      parent: this.editorHost,
      doc: this.cell.source,
      language: lang,
      label: this.label(),
      onChange: (doc) => {
        this.cell.source = doc;
        this.host.changed();
      },
      onFocus: () => this.host.select(this, true),
      help: this.cell.type === 'code' ? this.host.help : () => null,
      lineNumbers: this.lineNumbers,
    });
    if (at) {
      m.setSelection(this.editor, at[0], at[1]);
    }
    if (typing) {
      this.editor.focus();
    }
    return this.editor;
  }

  get hasEditor(): boolean {
    return this.editor !== null;
  }

  private label(): string {
    return `Cell ${this.index + 1}, ${TYPE_NAME[this.cell.type]}`;
  }

  setIndex(i: number): void {
    this.index = i;
    this.node.dataset.cellIndex = String(i);
    this.node.setAttribute('aria-label', this.label());
    if (this.editor) {
      editorModule()?.setEditorLabel(this.editor, this.label());
    }
    this.outputs?.setLabel(`Output of cell ${i + 1}`);
    this.drawPrompt();
  }

  getIndex(): number {
    return this.index;
  }

  private drawPrompt(): void {
    if (this.cell.type !== 'code') {
      this.prompt.textContent = '';
      return;
    }
    const n = this.running ? '*' : (this.cell.executionCount ?? ' ');
    this.prompt.textContent = `[${n}]:`;
    this.node.dataset.executionState = this.running ?? 'idle';
  }

  /** setRunning marks the cell queued/running ("[*]:") or done. */
  setRunning(s: 'queued' | 'running' | null): void {
    this.running = s;
    this.drawPrompt();
  }

  get isRunning(): boolean {
    return this.running !== null;
  }

  setExecutionCount(n: number | null): void {
    this.cell.executionCount = n;
    this.drawPrompt();
  }

  /** setMarked shows the cell as one of several selected. */
  setMarked(on: boolean): void {
    this.node.classList.toggle('nb-marked', on);
  }

  /** setLineNumbers shows or hides line numbers in the cell's editor (as it is made, if it
   * has none yet). */
  setLineNumbers(on: boolean): void {
    this.lineNumbers = on;
    if (this.editor) editorModule()?.setLineNumbers(this.editor, on);
  }

  setSelected(on: boolean): void {
    this.node.classList.toggle('nb-selected', on);
    if (on) {
      this.node.setAttribute('aria-current', 'true');
    } else {
      this.node.removeAttribute('aria-current');
    }
  }

  /** edit enters edit mode: the editor (made now if need be) takes the focus. */
  edit(): void {
    if (this.cell.type === 'markdown' && !this.editingMarkdown) {
      this.editingMarkdown = true;
      this.rendered?.remove();
      this.rendered = null;
      this.editorHost.hidden = false;
    }
    this.node.classList.add('nb-editing');
    const v = this.ensureEditor();
    if (!v) {
      this.wantFocus = true;
      this.showFallback().focus({ preventScroll: true });
    } else if (!v.hasFocus) {
      v.focus();
    }
  }

  /** showFallback shows the text box that stands in for the editor until it arrives. */
  private showFallback(): HTMLTextAreaElement {
    if (this.fallback) {
      return this.fallback;
    }
    const box = h('textarea', {
      class: 'nb-editor-fallback',
      'aria-label': this.label(),
      spellcheck: 'false',
      autocapitalize: 'off',
      autocomplete: 'off',
    });
    box.value = this.cell.source;
    const fit = () => {
      box.rows = Math.max(1, box.value.split('\n').length);
    };
    fit();
    box.setSelectionRange(box.value.length, box.value.length);
    box.addEventListener('input', () => {
      this.cell.source = box.value;
      fit();
      this.host.changed();
    });
    box.addEventListener('focus', () => this.host.select(this, true));
    this.staticCode = null;
    this.editorHost.replaceChildren(box);
    this.fallback = box;
    return box;
  }

  /** leaveEdit returns to command mode (a markdown cell stays as it is until run). */
  leaveEdit(): void {
    this.node.classList.remove('nb-editing');
    this.wantFocus = false;
    this.hideInspect();
  }

  /** unrender shows a markdown cell's source (as Jupyter does for a cell just made markdown). */
  unrender(): void {
    if (this.cell.type !== 'markdown' || this.editingMarkdown) {
      return;
    }
    this.editingMarkdown = true;
    this.rendered?.remove();
    this.rendered = null;
    this.showStatic();
  }

  /** renderMarkdownCell shows a markdown cell rendered (running it). */
  renderMarkdownCell(): void {
    if (this.cell.type !== 'markdown') {
      return;
    }
    this.editingMarkdown = false;
    this.node.classList.remove('nb-editing');
    this.showRendered();
  }

  /** refreshSource redraws the source after the model's text changed from outside. */
  refreshSource(): void {
    if (this.editor) {
      if (this.editor.state.doc.toString() !== this.cell.source) {
        editorModule()?.setDoc(this.editor, this.cell.source);
      }
    } else if (this.staticCode) {
      this.showStatic();
    }
    if (this.rendered) {
      this.showRendered();
    }
  }

  showInspect(content: HTMLElement): void {
    this.inspectPanel.replaceChildren(
      h(
        'div',
        { class: 'nb-inspect-head' },
        h('span', {}, 'Inspect'),
        closeButton(() => this.hideInspect()),
      ),
      content,
    );
    this.inspectPanel.hidden = false;
  }

  hideInspect(): void {
    this.inspectPanel.hidden = true;
    this.inspectPanel.replaceChildren();
  }

  destroy(): void {
    this.editor?.destroy();
    this.node.remove();
  }
}

function closeButton(f: () => void): HTMLElement {
  const b = h('button', { type: 'button', class: 'nb-inspect-close', 'aria-label': 'Close inspect' }, '×');
  b.addEventListener('click', f);
  return b;
}
