// The command registry: every command of the notebook page (its id, label, menu, key
// bindings in command and edit mode, an enabled check and what it does). The menus, the
// command palette, the keyboard and the shortcuts help are all made from it.
import { hasCtrlOrAlt, keyName, sequence, type Key } from './keys';

/** Where the focus is: in a cell's editor (edit), on the notebook (command), or in some other
 * control (the toolbar, an input field, a dialog). */
export type Mode = 'command' | 'edit' | 'other';

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

/** The state between keys: the first D of D,D. */
export interface KeyState {
  pending?: string;
}

/** A key binding: a key name or a sequence ("D,D"), and when it applies in edit mode. */
export interface Binding {
  keys: string;
  when?: (ctx: EditContext) => boolean;
}

export const MENUS = ['File', 'Edit', 'View', 'Insert', 'Cell', 'Kernel', 'Help'] as const;
export type MenuName = (typeof MENUS)[number];

export interface CommandSpec {
  id: string;
  label: string;
  /** The menu it is in; none for commands only keys reach (select the next cell). */
  menu?: MenuName;
  /** Starts a group of its menu (a separator before it). */
  group?: boolean;
  /** Bindings in command mode, in edit mode, and in every mode (even in other controls). */
  command?: (string | Binding)[];
  edit?: (string | Binding)[];
  global?: string[];
  enabled?: () => boolean;
  /** Runs the command; false says it did not apply (its key then goes on to the editor). */
  run: () => boolean | void | Promise<void>;
}

function bindings(c: CommandSpec, mode: 'command' | 'edit' | 'global'): Binding[] {
  return (c[mode] ?? []).map((b) => (typeof b === 'string' ? { keys: b } : b));
}

export class CommandRegistry {
  private byId = new Map<string, CommandSpec>();
  private order: CommandSpec[] = [];

  constructor(specs: CommandSpec[] = []) {
    for (const s of specs) this.add(s);
  }

  add(c: CommandSpec): void {
    if (this.byId.has(c.id)) {
      throw new Error('command defined twice: ' + c.id);
    }
    this.byId.set(c.id, c);
    this.order.push(c);
  }

  get(id: string): CommandSpec | undefined {
    return this.byId.get(id);
  }

  all(): readonly CommandSpec[] {
    return this.order;
  }

  inMenu(menu: MenuName): CommandSpec[] {
    return this.order.filter((c) => c.menu === menu);
  }

  isEnabled(c: CommandSpec): boolean {
    try {
      return c.enabled ? c.enabled() : true;
    } catch {
      return false;
    }
  }

  /** run runs a command by id; false when it is unknown, disabled or did not apply. */
  run(id: string): boolean {
    const c = this.byId.get(id);
    if (!c || !this.isEnabled(c)) return false;
    const r = c.run();
    if (r instanceof Promise) {
      r.catch((err: unknown) => console.error(id, err));
      return true;
    }
    return r !== false;
  }

  /** keys are a command's bindings in a mode, as written ("Shift-Enter", "D,D"); the
   * bindings of every mode come with both. */
  keys(id: string, mode: 'command' | 'edit'): string[] {
    const c = this.byId.get(id);
    if (!c) return [];
    return [...bindings(c, mode), ...bindings(c, 'global')].map((b) => b.keys);
  }

  /** resolve maps a key in a mode to a command's id, or null to leave the key alone. It keeps
   * in state the first key of a sequence (D of D,D). */
  resolve(mode: Mode, k: Key, state: KeyState = {}, ctx: EditContext = {}): string | null {
    const name = keyName(k);
    const pending = state.pending;
    state.pending = undefined;
    for (const c of this.order) {
      for (const b of bindings(c, 'global')) {
        if (b.keys === name) return c.id;
      }
    }
    if (mode === 'other') {
      return null;
    }
    if (mode === 'edit' && ctx.completing && !hasCtrlOrAlt(name) && name !== 'Shift-Enter') {
      return null; // the completion popup's keys
    }
    let starts = false;
    for (const c of this.order) {
      for (const b of bindings(c, mode)) {
        const seq = sequence(b.keys);
        if (b.when && !b.when(ctx)) continue;
        if (seq.length === 1 && seq[0] === name) return c.id;
        if (seq.length === 2 && pending === seq[0] && seq[1] === name) return c.id;
        if (seq.length === 2 && seq[0] === name) starts = true;
      }
    }
    if (starts) {
      state.pending = name;
    }
    return null;
  }

  /** clashes lists keys bound to more than one command in a mode (none, in a good registry). */
  clashes(): string[] {
    const out: string[] = [];
    for (const mode of ['command', 'edit'] as const) {
      const seen = new Map<string, string>();
      for (const c of this.order) {
        for (const b of [...bindings(c, mode), ...bindings(c, 'global')]) {
          const other = seen.get(b.keys);
          if (other !== undefined && other !== c.id) out.push(`${mode} ${b.keys}: ${other} and ${c.id}`);
          seen.set(b.keys, c.id);
        }
      }
    }
    return out;
  }
}
