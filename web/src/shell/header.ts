// The header every page shares: the name of the place, a link to the dashboard, the user
// and log out.
import { config, treeURL, url } from './config';
import { h } from './dom';

/** header makes the page's banner; extra goes between the title and the user. */
export function header(title: string, ...extra: Node[]): HTMLElement {
  const c = config();
  return h(
    'header',
    { class: 'nb-header' },
    h('a', { class: 'nb-brand', href: treeURL(''), 'aria-label': 'nbkube: the dashboard' }, 'nbkube'),
    h('h1', { class: 'nb-title' }, title),
    ...extra,
    h(
      'span',
      { class: 'nb-user' },
      h('span', { class: 'nb-user-name' }, c.user),
      c.canLogout ? h('a', { href: url('logout'), class: 'nb-logout' }, 'Log out') : null,
    ),
  );
}

/** setTitle shows a file's name in the header and, as short (the name without the extension
 * its page implies), in the window's title. */
export function setTitle(name: string, short = name): void {
  document.title = `${short} – nbkube`;
  const t = document.querySelector('.nb-title');
  if (t) {
    t.textContent = name;
  }
}

/** folderLink leads back to the folder of a file's page in the dashboard (the dashboard opens
 * files in a tab of their own); it goes before the file's name. */
export function folderLink(dir: string): HTMLElement {
  return h(
    'a',
    { class: 'nb-folder', href: treeURL(dir), title: 'The folder in the dashboard' },
    dir ? dir + '/' : 'root /',
  );
}
