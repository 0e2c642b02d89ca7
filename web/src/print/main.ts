// The print page: the notebook at config().path, every cell rendered statically, and a Print
// button. document.body.dataset.ready becomes 'print' when all is rendered (the browser tests
// wait for it), or 'error' with the message in a role=alert element.
import '../shell/base.css';
import './print.css';
import type * as nbformat from '@jupyterlab/nbformat';
import { config } from '../shell/config';
import { h } from '../shell/dom';
import { header } from '../shell/header';
import { services } from '../shell/server';
import { renderNotebook } from './view';

async function main(): Promise<void> {
  const path = config().path;
  const name = path.split('/').pop() || path;
  document.title = `${name} (print)`;
  const print = h('button', { type: 'button', class: 'nb-print-button' }, 'Print');
  print.addEventListener('click', () => window.print());
  document.body.append(header(path || '/', print));
  const placeholder = h(
    'main',
    { class: 'nb-print', 'aria-busy': 'true' },
    h('p', { class: 'nb-loading' }, 'Loading…'),
  );
  document.body.append(placeholder);
  try {
    const model = await services().contents.get(path, { type: 'notebook', content: true });
    const nb = model.content as nbformat.INotebookContent | null;
    if (!nb || !Array.isArray(nb.cells)) {
      throw new Error(`${path} is not a notebook`);
    }
    // The contents API says nothing of trust; HTML is sanitised either way, and untrusted
    // only also drops its <style> elements.
    const view = renderNotebook(nb, { trusted: false });
    placeholder.replaceWith(view);
    await settled(view);
    document.body.dataset.ready = 'print';
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    placeholder.removeAttribute('aria-busy');
    placeholder.replaceChildren(h('p', { class: 'nb-alert', role: 'alert' }, `Could not show ${path}: ${message}`));
    document.body.dataset.ready = 'error';
  }
}

/** settled waits (a little, at most) for images and fonts (KaTeX's), so a print right after
 * is complete. */
async function settled(root: HTMLElement): Promise<void> {
  const images = [...root.querySelectorAll('img')].map((img) => img.decode().catch(() => undefined));
  const fonts = document.fonts ? document.fonts.ready.then(() => undefined) : Promise.resolve();
  const limit = new Promise<void>((resolve) => setTimeout(resolve, 5000));
  await Promise.race([Promise.all([...images, fonts]), limit]);
}

void main();
