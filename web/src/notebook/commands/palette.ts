// The command palette (Ctrl-Shift-P: type to filter the commands, Up/Down to choose, Enter
// runs, Escape closes) and the keyboard shortcuts help (H), both made from the registry.
import { openDialog } from '../../shell/dialogs';
import { h } from '../../shell/dom';
import { shortcut } from './menubar';
import { shown } from './keys';
import type { CommandRegistry, CommandSpec } from './registry';

/** matches tells a command that every word of the query is in (its label or its menu). */
export function matches(c: CommandSpec, query: string): boolean {
  const text = `${c.menu ?? ''} ${c.label} ${c.id}`.toLowerCase();
  return query
    .toLowerCase()
    .split(/\s+/)
    .filter((w) => w !== '')
    .every((w) => text.includes(w));
}

/** openPalette shows the palette; the command chosen runs once the focus is back where it
 * was. */
export async function openPalette(commands: CommandRegistry): Promise<void> {
  const back = document.activeElement as HTMLElement | null;
  const listId = 'nb-palette-list';
  const input = h('input', {
    type: 'text',
    class: 'nb-dialog-input nb-palette-input',
    role: 'combobox',
    'aria-label': 'Command',
    'aria-expanded': 'true',
    'aria-controls': listId,
    'aria-autocomplete': 'list',
    placeholder: 'Type to find a command',
  });
  const list = h('div', { class: 'nb-palette-list', role: 'listbox', id: listId, 'aria-label': 'Commands' });
  let shownItems: CommandSpec[] = [];
  let active = 0;
  let chosen: string | null = null;
  const draw = () => {
    shownItems = commands.all().filter((c) => matches(c, input.value) && commands.isEnabled(c));
    active = Math.min(active, Math.max(0, shownItems.length - 1));
    list.replaceChildren(
      ...shownItems.map((c, i) => {
        const keys = shortcut(commands, c.id);
        const o = h(
          'div',
          {
            class: 'nb-palette-item',
            role: 'option',
            id: `nb-palette-${c.id}`,
            'aria-selected': String(i === active),
            'data-command': c.id,
          },
          h('span', { class: 'nb-menu-label' }, (c.menu ? c.menu + ': ' : '') + c.label),
          h('kbd', { class: 'nb-menu-keys' }, keys ? shown(keys) : ''),
        );
        o.addEventListener('mousedown', (e) => e.preventDefault());
        o.addEventListener('click', () => choose(c.id));
        return o;
      }),
    );
    const a = shownItems[active];
    if (a) {
      input.setAttribute('aria-activedescendant', `nb-palette-${a.id}`);
      list.children[active]?.scrollIntoView?.({ block: 'nearest' });
    } else {
      input.removeAttribute('aria-activedescendant');
    }
  };
  const { dialog, result } = openDialog('Command palette', [input, list], []);
  dialog.classList.add('nb-palette');
  const choose = (id: string) => {
    chosen = id;
    dialog.close('run');
  };
  input.addEventListener('input', () => {
    active = 0;
    draw();
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      const n = shownItems.length;
      if (n > 0) active = (active + (e.key === 'ArrowDown' ? 1 : n - 1)) % n;
      draw();
    } else if (e.key === 'Enter') {
      const c = shownItems[active];
      if (c) choose(c.id);
    } else {
      return;
    }
    e.preventDefault();
  });
  draw();
  input.focus();
  await result;
  if (back && back.isConnected) back.focus();
  if (chosen) commands.run(chosen);
}

/** showShortcuts lists every command with its keys in command mode and in edit mode. */
export async function showShortcuts(commands: CommandRegistry): Promise<void> {
  const back = document.activeElement as HTMLElement | null;
  const keys = (id: string, mode: 'command' | 'edit') =>
    h('td', {}, ...commands.keys(id, mode).flatMap((k, i) => [i > 0 ? ' or ' : '', h('kbd', {}, shown(k))]));
  const table = h(
    'table',
    { class: 'nb-shortcuts' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, 'Command'),
        h('th', { scope: 'col' }, 'Command mode'),
        h('th', { scope: 'col' }, 'Edit mode'),
      ),
    ),
    h(
      'tbody',
      {},
      ...commands
        .all()
        .map((c) =>
          h(
            'tr',
            {},
            h('th', { scope: 'row' }, (c.menu ? c.menu + ': ' : '') + c.label),
            keys(c.id, 'command'),
            keys(c.id, 'edit'),
          ),
        ),
    ),
  );
  const intro = h(
    'p',
    {},
    'Command mode (Esc) acts on cells; edit mode (Enter) types in the cell. A comma means one key after the other.',
  );
  const { dialog, result } = openDialog(
    'Keyboard shortcuts',
    [intro, h('div', { class: 'nb-shortcuts-box' }, table)],
    [{ value: 'ok', label: 'Close', primary: true }],
  );
  dialog.classList.add('nb-help');
  await result;
  if (back && back.isConnected) back.focus();
}
