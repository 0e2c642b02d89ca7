// The notebook page: loads the notebook, shows it, connects its kernel.
import '../shell/base.css';
import './notebook.css';
import { config } from '../shell/config';
import { h } from '../shell/dom';
import { header } from '../shell/header';
import { services } from '../shell/server';
import { NotebookPage } from './notebook';
import { basename } from './save';

async function main(): Promise<void> {
  const c = config();
  const page = new NotebookPage(services(), c.path);
  document.body.append(
    header(basename(c.path) || '/', page.toolbar.status, page.toolbar.dirty, page.toolbar.saveState),
    page.toolbar.node,
    h('main', { class: 'nb-notebook' }, page.cellsNode),
  );
  try {
    await page.load();
  } catch (err) {
    document.body.append(h('p', { class: 'nb-load-error', role: 'alert' }, 'The notebook could not be opened: ' + (err instanceof Error ? err.message : String(err))));
    return;
  }
  document.body.dataset.shown = 'notebook';
  await page.connectKernel();
  await page.kernel.whenIdle();
  if (page.kernel.status === 'idle') {
    document.body.dataset.ready = 'notebook';
  }
}

void main();
