// The text editor's page: loads the file, edits it, saves it as the notebook page saves
// (conditional on the version loaded, a dialog on a conflict), renames it and downloads it.
import { editURL, filesURL } from '../shell/config';
import { alert, messageOf, prompt } from '../shell/dialogs';
import { h, startDownload } from '../shell/dom';
import { setTitle } from '../shell/header';
import { basename, saveAsking, Saver } from '../shell/saver';
import type { Services } from '../shell/server';
import { DirtyTracker } from './dirty';
import { indentOf, languageOf, loadLanguage } from './languages';
import { TextEditor } from './texteditor';

export class EditorPage {
  readonly saver: Saver<string>;
  readonly dirty = new DirtyTracker();
  /** The header's parts: unsaved changes, the save state, the buttons. */
  readonly dirtyNode = h('span', { class: 'nb-dirty', 'data-dirty': 'false' });
  readonly saveState = h('span', { class: 'nb-save-state', role: 'status', 'aria-live': 'polite' });
  readonly toolbar: HTMLElement;
  readonly editorNode = h('main', { class: 'nb-text-editor' });
  private editor: TextEditor | undefined;

  constructor(manager: Services, path: string) {
    this.saver = new Saver(manager, path, 'text');
    const button = (label: string, title: string, run: () => void) => {
      const b = h('button', { type: 'button', class: 'nb-tool', title }, label);
      b.addEventListener('click', run);
      return b;
    };
    this.toolbar = h(
      'div',
      { class: 'nb-toolbar', role: 'toolbar', 'aria-label': 'File' },
      button('Save', 'Save (Ctrl-S)', () => void this.save()),
      button('Rename', 'Rename the file', () => void this.rename()),
      button('Download', 'Download the file', () => startDownload(filesURL(this.path, true))),
      button('Find', 'Find and replace (Ctrl-F)', () => this.editor?.find()),
    );
    this.dirty.onChange((d) => {
      this.dirtyNode.dataset.dirty = String(d);
      this.dirtyNode.textContent = d ? 'Unsaved changes' : '';
      document.body.dataset.dirty = String(d);
      this.showTitle();
    });
    document.body.dataset.dirty = 'false';
  }

  get path(): string {
    return this.saver.path;
  }

  /** load reads the file and shows it in the editor, the cursor in it. */
  async load(): Promise<void> {
    const text = await this.saver.load();
    const lang = languageOf(this.path);
    this.editor = new TextEditor({
      parent: this.editorNode,
      doc: text,
      label: this.label(),
      indent: indentOf(lang),
      onChange: () => this.dirty.changed(),
    });
    this.dirty.loaded();
    this.showTitle();
    this.editor.focus();
    this.editorNode.dataset.language = lang;
    void loadLanguage(lang).then((ext) => this.editor?.setLanguage(ext));
    window.addEventListener('beforeunload', (e) => {
      if (this.dirty.dirty) {
        e.preventDefault();
        e.returnValue = '';
      }
    });
    // Ctrl-S (Cmd-S) saves wherever the focus is, instead of the browser saving the page.
    document.addEventListener('keydown', (e) => {
      if ((e.ctrlKey || e.metaKey) && !e.altKey && !e.shiftKey && e.key.toLowerCase() === 's') {
        e.preventDefault();
        void this.save();
      }
    });
  }

  /** save writes the text, asking first if the file changed on the server. */
  async save(force = false): Promise<void> {
    if (!this.editor) return;
    const editor = this.editor;
    const version = this.dirty.current();
    const r = await saveAsking(
      this.saver,
      () => editor.text,
      'File',
      (s) => this.show(s),
      force,
    );
    if (r === 'saved') {
      this.dirty.saved(version);
    } else if (r === 'reload') {
      await this.reload();
    }
  }

  /** reload reads the file again (after a conflict), this page's changes dropped. */
  async reload(): Promise<void> {
    try {
      const text = await this.saver.load();
      this.editor?.setText(text);
      this.dirty.loaded();
    } catch (err) {
      void alert('Reload failed', messageOf(err));
    }
  }

  /** rename renames the file in its folder; the page stays, at the new address. */
  async rename(): Promise<void> {
    const name = await prompt('Rename file', 'New name', basename(this.path), 'Rename');
    if (name && name !== basename(this.path)) {
      if (name.includes('/')) {
        await alert('Rename', 'A name cannot contain “/”.');
      } else {
        try {
          await this.saver.rename(name);
          history.replaceState(null, '', editURL(this.path));
          this.editor?.setLabel(this.label());
          this.showTitle();
        } catch (err) {
          void alert('Rename failed', messageOf(err));
        }
      }
    }
    this.editor?.focus();
  }

  private show(state: string): void {
    this.saveState.textContent = state;
  }

  private label(): string {
    return `Text of ${basename(this.path)}`;
  }

  private showTitle(): void {
    const name = basename(this.path);
    setTitle(name, (this.dirty.dirty ? '● ' : '') + name);
  }
}
