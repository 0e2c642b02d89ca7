// The menu bar (File, Edit, View, Insert, Cell, Kernel, Help), made from the command
// registry: the ARIA menubar pattern (arrow keys between and within menus, Home/End, Enter or
// Space runs, Escape closes and then gives the focus back to where it was), each item with
// its keys.
import './commands.css';
import { h } from '../../shell/dom';
import { ariaKeys, shown } from './keys';
import { MENUS, type CommandRegistry, type CommandSpec } from './registry';

/** shortcut is the key a command is best known by: its first in command mode, else in edit
 * mode. */
export function shortcut(commands: CommandRegistry, id: string): string {
  return commands.keys(id, 'command')[0] ?? commands.keys(id, 'edit')[0] ?? '';
}

/** consume keeps a key that was acted on from the page and the browser. */
function consume(e: KeyboardEvent, handled: boolean): void {
  if (handled) {
    e.preventDefault();
    e.stopPropagation();
  }
}

export class MenuBar {
  readonly node: HTMLElement;
  private tops: HTMLElement[] = [];
  private popup: HTMLElement | null = null;
  private openIndex = -1;
  /** Where the focus was before the menu bar took it. */
  private returnTo: HTMLElement | null = null;

  constructor(
    private commands: CommandRegistry,
    private refocus: () => void = () => undefined,
  ) {
    this.node = h('div', { class: 'nb-menubar', role: 'menubar', 'aria-label': 'Notebook menu' });
    MENUS.forEach((name, i) => {
      const top = h(
        'div',
        {
          class: 'nb-menu-top',
          role: 'menuitem',
          tabindex: i === 0 ? '0' : '-1',
          'aria-haspopup': 'menu',
          'aria-expanded': 'false',
          'data-menu': name,
        },
        name,
      );
      top.addEventListener('mousedown', (e) => {
        e.preventDefault(); // the focus stays where it was until the menu opens
        this.remember();
        if (this.openIndex === i) this.close(true);
        else this.open(i, 'first');
      });
      top.addEventListener('mouseenter', () => {
        if (this.openIndex >= 0 && this.openIndex !== i) this.open(i, 'first');
      });
      top.addEventListener('keydown', (e) => consume(e, this.onTopKey(e.key, i)));
      this.tops.push(top);
      this.node.append(top);
    });
    this.node.addEventListener('focusin', (e) => {
      const from = e.relatedTarget as HTMLElement | null;
      if (from && !this.node.contains(from)) this.returnTo = from;
    });
    document.addEventListener('mousedown', (e) => {
      if (this.popup && !this.node.contains(e.target as Node)) this.close(false);
    });
  }

  private remember(): void {
    const a = document.activeElement as HTMLElement | null;
    if (a && !this.node.contains(a)) this.returnTo = a;
  }

  /** leave closes the menus and gives the focus back. */
  private leave(): void {
    this.close(false);
    this.giveBack();
  }

  /** giveBack returns the focus to where it was before the menu bar. */
  private giveBack(): void {
    const r = this.returnTo;
    this.returnTo = null;
    if (r && r.isConnected && r !== document.body) r.focus();
    else this.refocus();
  }

  private focusTop(i: number): void {
    this.tops.forEach((t, j) => t.setAttribute('tabindex', j === i ? '0' : '-1'));
    this.tops[i].focus();
  }

  /** onTopKey acts on a key on menu bar item i; false leaves the key alone. */
  private onTopKey(key: string, i: number): boolean {
    const n = this.tops.length;
    switch (key) {
      case 'ArrowRight':
      case 'ArrowLeft': {
        const j = (i + (key === 'ArrowRight' ? 1 : n - 1)) % n;
        if (this.openIndex >= 0) this.open(j, 'first');
        else this.focusTop(j);
        break;
      }
      case 'Home':
        this.focusTop(0);
        break;
      case 'End':
        this.focusTop(n - 1);
        break;
      case 'ArrowDown':
      case 'Enter':
      case ' ':
        this.open(i, 'first');
        break;
      case 'ArrowUp':
        this.open(i, 'last');
        break;
      case 'Escape':
        this.leave();
        break;
      default:
        return false;
    }
    return true;
  }

  /** open shows menu i, its first or last item focused (or the focus left alone). */
  open(i: number, focus: 'first' | 'last'): void {
    this.close(false);
    const name = MENUS[i];
    const menu = h('div', { class: 'nb-menu', role: 'menu', 'aria-label': name });
    let groupStarted = false;
    for (const c of this.commands.inMenu(name)) {
      if (c.group && groupStarted) menu.append(h('div', { role: 'separator', class: 'nb-menu-sep' }));
      groupStarted = true;
      menu.append(this.item(c));
    }
    menu.addEventListener('keydown', (e) => consume(e, this.onMenuKey(e.key)));
    const top = this.tops[i];
    top.setAttribute('aria-expanded', 'true');
    this.tops.forEach((t, j) => t.setAttribute('tabindex', j === i ? '0' : '-1'));
    top.after(menu);
    menu.style.left = `${top.offsetLeft}px`;
    this.popup = menu;
    this.openIndex = i;
    const items = this.items();
    items[focus === 'first' ? 0 : items.length - 1]?.focus();
  }

  private item(c: CommandSpec): HTMLElement {
    const keys = shortcut(this.commands, c.id);
    const enabled = this.commands.isEnabled(c);
    const el = h(
      'div',
      {
        class: 'nb-menu-item',
        role: 'menuitem',
        tabindex: '-1',
        'data-command': c.id,
        'aria-disabled': enabled ? undefined : 'true',
        'aria-keyshortcuts': keys ? ariaKeys(keys) : undefined,
      },
      h('span', { class: 'nb-menu-label' }, c.label),
      h('kbd', { class: 'nb-menu-keys' }, keys ? shown(keys) : ''),
    );
    el.addEventListener('click', () => this.activate(el));
    el.addEventListener('mouseenter', () => el.focus());
    return el;
  }

  private items(): HTMLElement[] {
    return this.popup ? [...this.popup.querySelectorAll<HTMLElement>('[role=menuitem]')] : [];
  }

  /** onMenuKey acts on a key in the open menu; false leaves the key alone. */
  private onMenuKey(key: string): boolean {
    const items = this.items();
    const i = items.indexOf(document.activeElement as HTMLElement);
    const n = items.length;
    switch (key) {
      case 'ArrowDown':
        items[(i + 1) % n]?.focus();
        break;
      case 'ArrowUp':
        items[(i + n - 1) % n]?.focus();
        break;
      case 'Home':
        items[0]?.focus();
        break;
      case 'End':
        items[n - 1]?.focus();
        break;
      case 'ArrowRight':
      case 'ArrowLeft': {
        const m = this.tops.length;
        this.open((this.openIndex + (key === 'ArrowRight' ? 1 : m - 1)) % m, 'first');
        break;
      }
      case 'Enter':
      case ' ':
        if (i >= 0) this.activate(items[i]);
        break;
      case 'Escape':
        this.close(true);
        break;
      case 'Tab':
        this.leave();
        break;
      default:
        return false;
    }
    return true;
  }

  /** activate closes the menu, gives the focus back, and runs the item's command. */
  private activate(el: HTMLElement): void {
    if (el.getAttribute('aria-disabled') === 'true') return;
    const id = el.dataset.command ?? '';
    this.leave();
    this.commands.run(id);
  }

  /** close closes the open menu; toTop puts the focus on its menu bar item. */
  close(toTop: boolean): void {
    const i = this.openIndex;
    this.popup?.remove();
    this.popup = null;
    this.openIndex = -1;
    if (i >= 0) {
      this.tops[i].setAttribute('aria-expanded', 'false');
      if (toTop) this.focusTop(i);
    }
  }
}
