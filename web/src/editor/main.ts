// The text editor's page (/edit/<path>): a text file in CodeMirror, saved as notebooks are.
import '../shell/base.css';
import '../shell/filepage.css';
import './editor.css';
import { config } from '../shell/config';
import { h } from '../shell/dom';
import { folderLink, header } from '../shell/header';
import { markReady } from '../shell/ready';
import { basename, dirname } from '../shell/saver';
import { services } from '../shell/server';
import { EditorPage } from './page';

async function main(): Promise<void> {
  const c = config();
  const page = new EditorPage(services(), c.path);
  const top = h('div', { class: 'nb-top' }, header(basename(c.path), page.dirtyNode, page.saveState), page.toolbar);
  top.querySelector('.nb-title')?.before(folderLink(dirname(c.path)));
  document.body.classList.add('nb-editor-page');
  document.body.append(top, page.editorNode);
  try {
    await page.load();
  } catch (err) {
    page.editorNode.append(
      h(
        'p',
        { class: 'nb-load-error', role: 'alert' },
        'The file could not be opened: ' + (err instanceof Error ? err.message : String(err)),
      ),
    );
    return;
  }
  markReady('editor');
}

void main();
