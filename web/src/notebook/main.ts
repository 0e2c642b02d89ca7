// The notebook page: loads the notebook, shows it, connects its kernel.
import '../shell/base.css';
import '../shell/filepage.css';
import './notebook.css';
import { config } from '../shell/config';
import { h } from '../shell/dom';
import { folderLink, header } from '../shell/header';
import { markReady, markRendered } from '../shell/ready';
import { services } from '../shell/server';
import { NotebookPage } from './notebook';
import { basename, dirname } from '../shell/saver';

async function main(): Promise<void> {
  const c = config();
  const page = new NotebookPage(services(), c.path);
  // The header (name, kernel status, save state), the menus and the toolbar stay in view together.
  const top = h(
    'div',
    { class: 'nb-top' },
    header(
      basename(c.path) || '/',
      page.toolbar.kernelName,
      page.toolbar.status,
      page.toolbar.dirty,
      page.toolbar.saveState,
    ),
    page.menubar.node,
    page.toolbar.node,
  );
  // Before the name, the way back to the notebook's folder.
  top.querySelector('.nb-title')?.before(folderLink(dirname(c.path)));
  // A cell brought into view stops below them.
  new ResizeObserver(() => {
    document.documentElement.style.setProperty('--nb-top-height', `${top.offsetHeight}px`);
  }).observe(top);
  document.body.append(top, h('main', { class: 'nb-notebook' }, page.cellsNode));
  try {
    await page.load();
  } catch (err) {
    document.body.append(
      h(
        'p',
        { class: 'nb-load-error', role: 'alert' },
        'The notebook could not be opened: ' + (err instanceof Error ? err.message : String(err)),
      ),
    );
    return;
  }
  // Shown and editable (the editors come as the cells come into view).
  markRendered('notebook');
  await page.connectKernel();
  await page.kernel.whenIdle();
  if (page.kernel.status === 'idle') {
    markReady('notebook');
  }
}

void main();
