// The notebook file's actions that talk to the user: save (with the choice a conflict needs),
// reload, checkpoint, revert to a checkpoint, rename.
import type * as nbformat from '@jupyterlab/nbformat';
import type { KernelSession } from './kernel';
import { alert, messageOf, pick, prompt } from '../shell/dialogs';
import type { NotebookModel } from './model';
import { basename, saveAsking, type Saver } from '../shell/saver';
import { withIpynb } from './save';
import { recordedRuns, type RecordedRun } from './recorded';
import type { Toolbar } from './toolbar';

/** FileHost is what the file's actions need of the page. */
export interface FileHost {
  readonly model: NotebookModel;
  readonly saver: Saver<nbformat.INotebookContent>;
  readonly toolbar: Toolbar;
  readonly kernel: KernelSession;
  /** loaded shows the notebook the model was loaded with again. */
  loaded(): void;
  /** renamed shows the file's new name. */
  renamed(): void;
  /** refocus gives the focus back to the notebook after a dialog. */
  refocus(): void;
  /** showRun puts a run the server recorded into its cell (see recorded.ts). */
  showRun(run: RecordedRun): void;
}

export class FileActions {
  constructor(private host: FileHost) {}

  /** save saves the notebook, asking first if the file changed on the server. */
  async save(force = false, quiet = false): Promise<void> {
    const { model, toolbar } = this.host;
    let version = model.version;
    const r = await saveAsking(
      this.host.saver,
      () => model.toJSON(),
      'Notebook',
      (s) => toolbar.setSaveState(s),
      force,
      quiet,
      async () => {
        const taken = await this.takeRecorded();
        // The runs taken are part of what the save sends again.
        if (taken) version = model.version;
        return taken;
      },
    );
    if (r === 'reload') {
      await this.reload();
    } else if (r === 'saved' && model.version === version) {
      model.setDirty(false);
    }
  }

  /** takeRecorded settles a conflict whose cause is only the outputs the server wrote of runs
   * whose page was away: it shows them in their cells and adopts the server's version. False
   * when the server's copy changed otherwise (the user decides). */
  private async takeRecorded(): Promise<boolean> {
    const { saver, model } = this.host;
    if (!saver.base) {
      return false;
    }
    const v = await saver.fetch();
    const runs = recordedRuns(saver.base, v.content, model.cells);
    if (!runs) {
      return false;
    }
    for (const run of runs) {
      this.host.showRun(run);
    }
    saver.adopt(v);
    return true;
  }

  /** reload reads the file again (after a conflict or a revert). */
  async reload(): Promise<void> {
    const nb = await this.host.saver.load();
    this.host.model.load(nb);
    this.host.loaded();
  }

  async checkpoint(): Promise<void> {
    try {
      if (this.host.model.dirty) {
        await this.save();
      }
      const cp = await this.host.saver.createCheckpoint();
      this.host.toolbar.setSaveState('Checkpoint at ' + new Date(cp.last_modified).toLocaleTimeString());
    } catch (err) {
      void alert('Checkpoint failed', messageOf(err));
    }
  }

  async revert(): Promise<void> {
    let cps;
    try {
      cps = await this.host.saver.listCheckpoints();
    } catch (err) {
      void alert('Revert failed', messageOf(err));
      return;
    }
    if (cps.length === 0) {
      await alert('Revert', 'This notebook has no checkpoints.');
      return;
    }
    const id = await pick(
      'Revert to a checkpoint',
      'Checkpoint',
      // Newest first: the one most likely wanted is the one preselected.
      [...cps]
        .sort((a, b) => Date.parse(b.last_modified) - Date.parse(a.last_modified))
        .map((c) => ({ value: c.id, label: new Date(c.last_modified).toLocaleString() })),
      'Revert',
    );
    if (!id) return;
    try {
      await this.host.saver.restoreCheckpoint(id);
      await this.reload();
    } catch (err) {
      void alert('Revert failed', messageOf(err));
    }
  }

  async rename(): Promise<void> {
    const { saver, kernel } = this.host;
    const name = await prompt('Rename notebook', 'New name', basename(saver.path), 'Rename');
    if (!name || name === basename(saver.path)) {
      this.host.refocus();
      return;
    }
    if (name.includes('/')) {
      await alert('Rename', 'A name cannot contain “/”.');
      return;
    }
    try {
      const path = await saver.rename(withIpynb(name));
      this.host.renamed();
      await kernel.setPath(path, basename(path)).catch(() => undefined);
    } catch (err) {
      void alert('Rename failed', messageOf(err));
    }
    this.host.refocus();
  }
}
