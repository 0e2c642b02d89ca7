// The one place that owns the notebook's keyboard shortcuts (Jupyter's): which key, in which
// mode, runs which command. resolve() is pure and tested; installKeyboard() listens on the
// document (capture phase, before CodeMirror) and runs the commands it resolves.

export type Mode = 'command' | 'edit' | 'other';

export type Command =
  | 'run-select-next'
  | 'run'
  | 'run-insert-below'
  | 'command-mode'
  | 'edit-mode'
  | 'insert-above'
  | 'insert-below'
  | 'delete'
  | 'to-markdown'
  | 'to-code'
  | 'to-raw'
  | 'cut'
  | 'copy'
  | 'paste'
  | 'select-prev'
  | 'select-next'
  | 'undo-delete'
  | 'save'
  | 'complete'
  | 'inspect'
  | 'interrupt'
  | 'restart'
  | 'move-up'
  | 'move-down';

/** The part of a KeyboardEvent the mapping looks at. */
export interface Key {
  key: string;
  shiftKey?: boolean;
  ctrlKey?: boolean;
  altKey?: boolean;
  metaKey?: boolean;
}

/** What the editor knows that changes a key's meaning in edit mode. */
export interface EditContext {
  /** The completion popup is open: Enter, arrows, Tab and Esc are its. */
  completing?: boolean;
  /** The text before the cursor on its line is blank (Tab indents, as in Jupyter). */
  blankBeforeCursor?: boolean;
  /** The selection is not empty (Tab indents the selection). */
  hasSelection?: boolean;
  /** The cursor is on the first/last line (Up/Down leave the cell). */
  atFirstLine?: boolean;
  atLastLine?: boolean;
}

/** The state between keys: the first D of DD, the first I of II, the first 0 of 00. */
export interface KeyState {
  pending?: string;
}

function mods(k: Key): string {
  return (k.ctrlKey || k.metaKey ? 'C' : '') + (k.altKey ? 'A' : '') + (k.shiftKey ? 'S' : '');
}

/** resolve maps a key in a mode to a command, or null to leave the key alone. It updates
 * state for two-key commands (DD delete, II interrupt, 00 restart). */
export function resolve(mode: Mode, k: Key, state: KeyState = {}, ctx: EditContext = {}): Command | null {
  const m = mods(k);
  const key = k.key;
  // Everywhere.
  if (m === 'C' && (key === 's' || key === 'S')) {
    state.pending = undefined;
    return 'save';
  }
  if (mode === 'other') {
    return null;
  }
  if (key === 'Enter') {
    if (mode === 'edit' && ctx.completing && m === '') {
      return null;
    }
    if (m === 'S') return 'run-select-next';
    if (m === 'C') return 'run';
    if (m === 'A') return 'run-insert-below';
  }
  if (mode === 'edit') {
    if (ctx.completing) {
      return null;
    }
    if (key === 'Escape' && m === '') return 'command-mode';
    if (key === 'Tab' && m === '' && !ctx.blankBeforeCursor && !ctx.hasSelection) return 'complete';
    if (key === 'Tab' && m === 'S') return 'inspect';
    if (key === 'ArrowUp' && m === '' && ctx.atFirstLine) return 'select-prev';
    if (key === 'ArrowDown' && m === '' && ctx.atLastLine) return 'select-next';
    return null;
  }
  // Command mode.
  const pending = state.pending;
  state.pending = undefined;
  if (m === 'C' || m === 'CA' || m === 'CS') {
    return null; // the browser's own (copy text, find, …)
  }
  if (key === 'Enter' && m === '') return 'edit-mode';
  if (key === 'ArrowUp' && m === '') return 'select-prev';
  if (key === 'ArrowDown' && m === '') return 'select-next';
  if (m === 'A' && key === 'ArrowUp') return 'move-up';
  if (m === 'A' && key === 'ArrowDown') return 'move-down';
  if (m !== '' && m !== 'S') return null;
  switch (key) {
    case 'a':
      return 'insert-above';
    case 'b':
      return 'insert-below';
    case 'm':
      return 'to-markdown';
    case 'y':
      return 'to-code';
    case 'r':
      return 'to-raw';
    case 'x':
      return 'cut';
    case 'c':
      return 'copy';
    case 'v':
      return 'paste';
    case 'k':
      return 'select-prev';
    case 'j':
      return 'select-next';
    case 'z':
      return 'undo-delete';
    case 'd':
    case 'i':
    case '0':
      if (pending === key) {
        return key === 'd' ? 'delete' : key === 'i' ? 'interrupt' : 'restart';
      }
      state.pending = key;
      return null;
  }
  return null;
}

/** Keys that are the notebook's in command mode even when no command runs yet (the first
 * D of DD): the browser must not act on them (e.g. scroll, find-as-you-type). */
export function swallowInCommandMode(k: Key): boolean {
  const m = mods(k);
  return (m === '' || m === 'S') && /^[a-z0-9]$/.test(k.key);
}

export interface KeyboardHost {
  /** The mode the focus is in now. */
  mode(): Mode;
  /** The edit context when in edit mode. */
  editContext(): EditContext;
  /** Runs a command; returns false if it did not apply (the key then goes on). */
  run(c: Command): boolean | void;
}

/** installKeyboard listens for the notebook's shortcuts on the document. */
export function installKeyboard(doc: Document, host: KeyboardHost): void {
  const state: KeyState = {};
  doc.addEventListener(
    'keydown',
    (e) => {
      if (e.isComposing) {
        return;
      }
      const mode = host.mode();
      const ctx = mode === 'edit' ? host.editContext() : {};
      const c = resolve(mode, e, state, ctx);
      if (c === null) {
        if (mode === 'command' && swallowInCommandMode(e)) {
          e.preventDefault();
        }
        return;
      }
      if (host.run(c) === false) {
        return;
      }
      e.preventDefault();
      e.stopPropagation();
    },
    true,
  );
}
