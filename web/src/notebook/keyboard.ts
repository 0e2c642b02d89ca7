// The notebook's keyboard: listens on the document (capture phase, before CodeMirror) and
// runs the command the registry binds to the key in the current mode (commands/notebook.ts
// holds the bindings, Jupyter's).
import type { Key } from './commands/keys';
import type { CommandRegistry, EditContext, KeyState, Mode } from './commands/registry';

export type { Key } from './commands/keys';
export type { EditContext, KeyState, Mode } from './commands/registry';

/** Keys that are the notebook's in command mode even when no command runs yet (the first
 * D of D,D): the browser must not act on them (e.g. scroll, find-as-you-type). */
export function swallowInCommandMode(k: Key): boolean {
  const m = (k.ctrlKey || k.metaKey ? 'C' : '') + (k.altKey ? 'A' : '');
  return m === '' && /^[a-z0-9]$/i.test(k.key);
}

export interface KeyboardHost {
  /** The mode the focus is in now. */
  mode(): Mode;
  /** The edit context when in edit mode. */
  editContext(): EditContext;
  readonly commands: CommandRegistry;
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
      const id = host.commands.resolve(mode, e, state, ctx);
      if (id === null) {
        if (mode === 'command' && swallowInCommandMode(e)) {
          e.preventDefault();
        }
        return;
      }
      if (!host.commands.run(id)) {
        return;
      }
      e.preventDefault();
      e.stopPropagation();
    },
    true,
  );
}
