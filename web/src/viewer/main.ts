// The viewer's page (/view/<path>): a file as the browser shows it by itself. An image in an
// <img>; a PDF in a frame (the browser's viewer); an HTML page in a sandboxed frame, an origin
// of its own (no allow-same-origin, and /files/ adds a CSP sandbox besides), so that its
// scripts reach neither this page nor the API with the user's login. Any other file is
// offered for download.
import '../shell/base.css';
import './viewer.css';
import { config, editURL, filesURL, viewKind } from '../shell/config';
import { h } from '../shell/dom';
import { folderLink, header } from '../shell/header';
import { markReady } from '../shell/ready';
import { basename, dirname } from '../shell/saver';

/** shown is what the viewer shows of the file at path. */
function shown(path: string): HTMLElement {
  const name = basename(path);
  const src = filesURL(path);
  switch (viewKind(path)) {
    case 'image':
      return h('img', { class: 'nb-view-image', src, alt: name });
    case 'pdf':
      return h('iframe', { class: 'nb-view-frame', src, title: name });
    case 'html':
      return h('iframe', {
        class: 'nb-view-frame',
        src,
        title: name,
        sandbox: 'allow-scripts',
        referrerpolicy: 'no-referrer',
      });
  }
  return h(
    'p',
    { class: 'nb-view-none' },
    `The browser cannot show ${name} by itself, and it is not text to edit. `,
    h('a', { href: filesURL(path, true), download: '' }, `Download ${name}`),
    '.',
  );
}

const c = config();
const name = basename(c.path);
document.title = `${name} – nbkube`;
const links = h(
  'span',
  { class: 'nb-view-links' },
  h('a', { href: filesURL(c.path, true), download: '', 'aria-label': `Download ${name}` }, 'Download'),
  viewKind(c.path) === 'html' || c.path.toLowerCase().endsWith('.svg')
    ? h('a', { href: editURL(c.path), 'aria-label': `Edit ${name} as text` }, 'Edit')
    : null,
);
const top = header(name, links);
top.querySelector('.nb-title')?.before(folderLink(dirname(c.path)));
document.body.classList.add('nb-viewer-page');
document.body.append(top, h('main', { class: 'nb-viewer', 'data-kind': viewKind(c.path) ?? 'none' }, shown(c.path)));
markReady('viewer');
