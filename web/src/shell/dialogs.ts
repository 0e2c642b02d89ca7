// Modal dialogs (the native <dialog>: focus kept inside, Esc cancels): a choice among
// buttons, a text prompt, and a pick from a list.
import './dialogs.css';
import { h } from './dom';

export interface Choice {
  value: string;
  label: string;
  primary?: boolean;
}

/** openDialog shows a modal dialog of body and buttons; result is the value of the button
 * that closed it, or null (Esc, or a cancel button). */
export function openDialog(
  title: string,
  body: Node[],
  buttons: Choice[],
  onOpen?: (d: HTMLDialogElement) => void,
): { dialog: HTMLDialogElement; result: Promise<string | null> } {
  const titleId = 'nb-dialog-title-' + Math.random().toString(36).slice(2);
  const form = h('form', { method: 'dialog', class: 'nb-dialog-form' });
  const row = h('div', { class: 'nb-dialog-buttons' });
  for (const b of buttons) {
    row.append(h('button', { type: 'submit', value: b.value, class: b.primary ? 'nb-primary' : undefined }, b.label));
  }
  form.append(h('h2', { id: titleId, class: 'nb-dialog-title' }, title), ...body, row);
  const dialog = h('dialog', { class: 'nb-dialog', 'aria-labelledby': titleId }, form);
  document.body.append(dialog);
  const result = new Promise<string | null>((resolve) => {
    dialog.addEventListener('close', () => {
      const v = dialog.returnValue;
      dialog.remove();
      resolve(v === '' || v === 'cancel' ? null : v);
    });
  });
  dialog.returnValue = '';
  if (typeof dialog.showModal === 'function') {
    dialog.showModal();
  } else {
    dialog.setAttribute('open', '');
  }
  onOpen?.(dialog);
  return { dialog, result };
}

/** choose asks a question with buttons; resolves with the value chosen, or null (Esc). */
export function choose(title: string, message: string, buttons: Choice[]): Promise<string | null> {
  return openDialog(title, [h('p', {}, message)], buttons).result;
}

/** alert shows a message with one OK button. */
export async function alert(title: string, message: string): Promise<void> {
  await choose(title, message, [{ value: 'ok', label: 'OK', primary: true }]);
}

/** prompt asks for a line of text; resolves with it, or null when cancelled. */
export async function prompt(title: string, label: string, value: string, okLabel = 'OK'): Promise<string | null> {
  const input = h('input', { type: 'text', class: 'nb-dialog-input', value, 'aria-label': label, required: true });
  const { dialog, result } = openDialog(
    title,
    [h('label', { class: 'nb-dialog-label' }, label, input)],
    [
      { value: 'cancel', label: 'Cancel' },
      { value: 'ok', label: okLabel, primary: true },
    ],
  );
  input.focus();
  input.select();
  // Enter submits with the primary button's value.
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      if (input.value.trim() !== '') {
        dialog.close('ok');
      }
    }
  });
  const r = await result;
  return r === 'ok' ? input.value.trim() : null;
}

/** pick asks for one of a list (radio buttons); resolves with its value, or null. */
export async function pick(title: string, message: string, items: Choice[], okLabel: string): Promise<string | null> {
  const name = 'nb-pick-' + Math.random().toString(36).slice(2);
  const list = h('fieldset', { class: 'nb-dialog-list' }, h('legend', {}, message));
  items.forEach((it, i) => {
    list.append(h('label', {}, h('input', { type: 'radio', name, value: it.value, checked: i === 0 }), ' ', it.label));
  });
  const { result } = openDialog(
    title,
    [list],
    [
      { value: 'cancel', label: 'Cancel' },
      { value: 'ok', label: okLabel, primary: true },
    ],
  );
  const chosen = () => list.querySelector<HTMLInputElement>(`input[name="${name}"]:checked`)?.value ?? null;
  let v = chosen();
  list.addEventListener('change', () => (v = chosen()));
  const r = await result;
  return r === 'ok' ? v : null;
}

/** messageOf is an error's message, for a dialog. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** askOnConflict asks what to do when a save finds the file changed on the server since it
 * was loaded or last saved here: overwrite it, reload it (losing this page's changes), or
 * neither (null). */
export async function askOnConflict(what: 'Notebook' | 'File'): Promise<'overwrite' | 'reload' | null> {
  const c = await choose(
    `${what} changed on the server`,
    `The file was changed since it was opened or last saved here. Overwrite it with this page’s ${what === 'Notebook' ? 'notebook' : 'text'}, or reload the file (losing this page’s changes)?`,
    [
      { value: 'cancel', label: 'Cancel' },
      { value: 'reload', label: 'Reload' },
      { value: 'overwrite', label: 'Overwrite', primary: true },
    ],
  );
  return c === 'overwrite' || c === 'reload' ? c : null;
}
