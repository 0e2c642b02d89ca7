// A text file's editor: CodeMirror 6 with line numbers, search (Ctrl-F), undo history,
// bracket matching, the file's language (which may arrive later) and an accessible name.
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import {
  bracketMatching,
  defaultHighlightStyle,
  indentOnInput,
  indentUnit,
  syntaxHighlighting,
} from '@codemirror/language';
import { highlightSelectionMatches, openSearchPanel, search, searchKeymap } from '@codemirror/search';
import { Compartment, EditorState, type Extension } from '@codemirror/state';
import {
  drawSelection,
  EditorView,
  highlightActiveLine,
  highlightActiveLineGutter,
  highlightSpecialChars,
  keymap,
  lineNumbers,
} from '@codemirror/view';
import { classHighlighter } from '@lezer/highlight';
import { pageNonce, theme } from './view';

export interface TextEditorOptions {
  parent: HTMLElement;
  doc: string;
  /** label is the text area's accessible name. */
  label: string;
  /** indent is one level of indentation (a tab for a Makefile). */
  indent: string;
  onChange: () => void;
}

export class TextEditor {
  readonly view: EditorView;
  private language = new Compartment();

  constructor(o: TextEditorOptions) {
    const n = pageNonce();
    this.view = new EditorView({
      parent: o.parent,
      state: EditorState.create({
        doc: o.doc,
        extensions: [
          lineNumbers(),
          highlightActiveLineGutter(),
          highlightSpecialChars(),
          history(),
          drawSelection(),
          indentOnInput(),
          indentUnit.of(o.indent),
          EditorState.tabSize.of(o.indent === '\t' ? 8 : 4),
          // Colours, and tok-* classes on the tokens too (what the tests look for).
          syntaxHighlighting(defaultHighlightStyle),
          syntaxHighlighting(classHighlighter),
          bracketMatching(),
          highlightActiveLine(),
          highlightSelectionMatches(),
          search({ top: true }),
          // Tab indents; Escape then Tab leaves the editor, as CodeMirror lets keyboards do.
          keymap.of([...searchKeymap, ...defaultKeymap, ...historyKeymap, indentWithTab]),
          this.language.of([]),
          EditorView.contentAttributes.of({ 'aria-label': o.label }),
          n ? EditorView.cspNonce.of(n) : [],
          theme,
          EditorView.updateListener.of((u) => {
            if (u.docChanged) {
              o.onChange();
            }
          }),
        ],
      }),
    });
  }

  /** text is the document. */
  get text(): string {
    return this.view.state.doc.toString();
  }

  /** setText replaces the document (a reload), the cursor kept where it can be. */
  setText(doc: string): void {
    const head = Math.min(this.view.state.selection.main.head, doc.length);
    this.view.dispatch({
      changes: { from: 0, to: this.view.state.doc.length, insert: doc },
      selection: { anchor: head },
    });
  }

  /** setLanguage sets the language (its parser loaded). */
  setLanguage(lang: Extension): void {
    this.view.dispatch({ effects: this.language.reconfigure(lang) });
  }

  /** setLabel changes the text area's accessible name (after a rename). */
  setLabel(label: string): void {
    this.view.contentDOM.setAttribute('aria-label', label);
  }

  /** find opens the search panel (find and replace). */
  find(): void {
    openSearchPanel(this.view);
  }

  focus(): void {
    this.view.focus();
  }
}
