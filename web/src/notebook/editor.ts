// A cell's editor: CodeMirror 6 with the kernel's language, bracket matching, undo history,
// an accessible name, and completion from the kernel (Tab, which keyboard.ts owns).
import {
  acceptCompletion,
  autocompletion,
  closeCompletion,
  completionStatus,
  startCompletion,
  type CompletionContext,
  type CompletionResult,
} from '@codemirror/autocomplete';
import { defaultKeymap, history, historyKeymap, indentLess, indentMore } from '@codemirror/commands';
import {
  bracketMatching,
  defaultHighlightStyle,
  indentOnInput,
  indentUnit,
  syntaxHighlighting,
} from '@codemirror/language';
import { Compartment, EditorState } from '@codemirror/state';
import { drawSelection, EditorView, highlightSpecialChars, keymap, lineNumbers } from '@codemirror/view';
import { languageExtension } from '../editor/languages';
import { pageNonce, theme } from '../editor/view';
import type { EditContext } from './keyboard';

/** Positions in Jupyter's messages count Unicode code points; JavaScript's count UTF-16 units. */
export function toCodePoints(s: string, jsIndex: number): number {
  let n = 0;
  for (let i = 0; i < jsIndex && i < s.length; i++, n++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      i++;
    }
  }
  return n;
}

export function fromCodePoints(s: string, cp: number): number {
  let i = 0;
  for (let n = 0; n < cp && i < s.length; n++) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < s.length ? 2 : 1;
  }
  return i;
}

/** What the kernel offers the editor. */
/** Completions is what a kernel's complete_reply offers. */
export interface Completions {
  matches: string[];
  cursor_start: number;
  cursor_end: number;
  metadata?: Record<string, unknown>;
}

export interface KernelHelp {
  complete(code: string, cursorPos: number): Promise<Completions | null>;
}

/** kernelCompletions is a CodeMirror completion source that asks the kernel. */
export function kernelCompletions(help: () => KernelHelp | null) {
  return async (ctx: CompletionContext): Promise<CompletionResult | null> => {
    const k = help();
    if (!k) {
      return null;
    }
    const code = ctx.state.doc.toString();
    const reply = await k.complete(code, toCodePoints(code, ctx.pos));
    if (!reply || reply.matches.length === 0) {
      return null;
    }
    const from = fromCodePoints(code, reply.cursor_start);
    const to = fromCodePoints(code, reply.cursor_end);
    const types = (reply.metadata?._jupyter_types_experimental as { text: string; type?: string }[] | undefined) ?? [];
    const typeOf = new Map(types.map((t) => [t.text, t.type]));
    return {
      from,
      to,
      options: reply.matches.map((m) => ({
        label: m,
        type: typeOf.get(m) && typeOf.get(m) !== '<unknown>' ? typeOf.get(m) : undefined,
      })),
      filter: false,
    };
  };
}

export interface EditorOptions {
  parent: HTMLElement;
  doc: string;
  language: string;
  label: string;
  onChange: (doc: string) => void;
  onFocus: () => void;
  help: () => KernelHelp | null;
  lineNumbers?: boolean;
}

/** The line numbers of an editor, turned on and off (L). */
const numbers = new Compartment();

/** setLineNumbers shows or hides an editor's line numbers. */
export function setLineNumbers(view: EditorView, on: boolean): void {
  view.dispatch({ effects: numbers.reconfigure(on ? lineNumbers() : []) });
}

/** createEditor makes a cell's editor. */
export function createEditor(o: EditorOptions): EditorView {
  const label = EditorView.contentAttributes.of({ 'aria-label': o.label });
  const n = pageNonce();
  return new EditorView({
    parent: o.parent,
    state: EditorState.create({
      doc: o.doc,
      extensions: [
        highlightSpecialChars(),
        numbers.of(o.lineNumbers ? lineNumbers() : []),
        history(),
        drawSelection(),
        indentOnInput(),
        indentUnit.of('    '),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        bracketMatching(),
        autocompletion({ override: [kernelCompletions(o.help)], activateOnTyping: false, defaultKeymap: true }),
        keymap.of([
          // Tab: keyboard.ts decides completion; what it leaves indents.
          { key: 'Tab', run: (v) => acceptCompletion(v) || indentMore(v), shift: indentLess },
          ...defaultKeymap,
          ...historyKeymap,
        ]),
        languageExtension(o.language),
        label,
        n ? EditorView.cspNonce.of(n) : [],
        theme,
        EditorView.lineWrapping,
        EditorView.updateListener.of((u) => {
          if (u.docChanged) {
            o.onChange(u.state.doc.toString());
          }
          if (u.focusChanged && u.view.hasFocus) {
            o.onFocus();
          }
        }),
      ],
    }),
  });
}

/** setSelection selects from anchor to head, offsets in the document's UTF-16 text (as a
 * text box's selectionStart and selectionEnd are). */
export function setSelection(view: EditorView, anchor: number, head: number): void {
  const len = view.state.doc.length;
  view.dispatch({ selection: { anchor: Math.min(anchor, len), head: Math.min(head, len) } });
}

/** setLabel changes an editor's accessible name (its cell moved). */
export function setEditorLabel(view: EditorView, label: string): void {
  view.contentDOM.setAttribute('aria-label', label);
}

/** editContext is what keyboard.ts needs to know of an editor. */
export function editContext(view: EditorView): EditContext {
  const s = view.state;
  const sel = s.selection.main;
  const line = s.doc.lineAt(sel.head);
  const before = s.doc.sliceString(line.from, sel.head);
  return {
    completing: completionStatus(s) !== null,
    blankBeforeCursor: before.trim() === '',
    hasSelection: !sel.empty,
    atFirstLine: line.number === 1,
    atLastLine: line.number === s.doc.lines,
  };
}

/** complete asks for completions at the cursor. */
export function complete(view: EditorView): void {
  startCompletion(view);
}

export function stopCompletion(view: EditorView): void {
  closeCompletion(view);
}

/** cursorCode is the document and the cursor position in code points (for inspect). */
export function cursorCode(view: EditorView): { code: string; pos: number } {
  const code = view.state.doc.toString();
  return { code, pos: toCodePoints(code, view.state.selection.main.head) };
}

/** setDoc replaces the editor's text (reload, revert). */
export function setDoc(view: EditorView, doc: string): void {
  view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: doc } });
}
