// Modal dialogs: native <dialog>.showModal(), which traps focus, closes on Escape and gives
// focus back to where it was.
import { h } from '../shell/dom';

let nextId = 0;

export interface ConfirmOptions {
  title: string;
  message: string;
  /** The confirming button's text ("Delete"). */
  confirm: string;
  /** Whether confirming destroys something: Cancel then has the focus first. */
  danger?: boolean;
}

/** confirmDialog asks a yes-or-no question; it resolves true when the user confirms. */
export function confirmDialog(opts: ConfirmOptions): Promise<boolean> {
  const id = `nb-dialog-${++nextId}`;
  const cancel = h('button', { type: 'submit', value: 'cancel', autofocus: !!opts.danger }, 'Cancel');
  const ok = h(
    'button',
    { type: 'submit', value: 'ok', class: opts.danger ? 'nb-danger' : 'nb-primary', autofocus: !opts.danger },
    opts.confirm,
  );
  const dialog = h(
    'dialog',
    { class: 'nb-dialog', 'aria-labelledby': id + '-title', 'aria-describedby': id + '-message' },
    h(
      'form',
      { method: 'dialog' },
      h('h2', { id: id + '-title' }, opts.title),
      h('p', { id: id + '-message' }, opts.message),
      h('div', { class: 'nb-dialog-buttons' }, cancel, ok),
    ),
  );
  document.body.append(dialog);
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      resolve(dialog.returnValue === 'ok');
      dialog.remove();
    });
    dialog.returnValue = '';
    dialog.showModal();
  });
}
