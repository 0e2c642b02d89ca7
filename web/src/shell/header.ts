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
