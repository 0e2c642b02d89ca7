// Loading and saving the notebook through the contents API: saves check first that nobody
// changed the file since it was loaded or last saved; autosave when dirty; checkpoints;
// rename.
import type { Contents } from '@jupyterlab/services';
import type { Services } from '../shell/server';
import type * as nbformat from '@jupyterlab/nbformat';

/** isNewer says whether the server's time is later than ours (both ISO 8601; a second's
 * slack, as Jupyter's own check has, for file systems that round times). */
export function isNewer(server: string | undefined, ours: string | undefined): boolean {
  if (!server || !ours) {
    return false;
  }
  const s = Date.parse(server);
  const o = Date.parse(ours);
  if (isNaN(s) || isNaN(o)) {
    return false;
  }
  return s - o > 500;
}

export type SaveResult = 'saved' | 'conflict' | 'failed';

export class Saver {
  path: string;
  lastModified: string | undefined;
  private saving: Promise<unknown> = Promise.resolve();

  constructor(
    private manager: Services,
    path: string,
  ) {
    this.path = path;
  }

  private get contents(): Contents.IManager {
    return this.manager.contents;
  }

  /** load fetches the notebook and remembers when it was last modified. */
  async load(): Promise<nbformat.INotebookContent> {
    const m = await this.contents.get(this.path, { type: 'notebook', content: true });
    this.lastModified = m.last_modified;
    this.path = m.path;
    return m.content as nbformat.INotebookContent;
  }

  /** changedOnServer says whether the file changed on the server since we loaded or saved it. */
  async changedOnServer(): Promise<boolean> {
    try {
      const m = await this.contents.get(this.path, { content: false });
      return isNewer(m.last_modified, this.lastModified);
    } catch {
      return false; // gone or unreadable: saving recreates it
    }
  }

  /** save writes the notebook (after the check, unless force). */
  save(nb: nbformat.INotebookContent, force = false): Promise<SaveResult> {
    const run = async (): Promise<SaveResult> => {
      if (!force && (await this.changedOnServer())) {
        return 'conflict';
      }
      const m = await this.contents.save(this.path, { type: 'notebook', format: 'json', content: nb as unknown as Contents.IModel['content'] });
      this.lastModified = m.last_modified;
      return 'saved';
    };
    const p = this.saving.then(run, run);
    this.saving = p.catch(() => undefined);
    return p;
  }

  createCheckpoint(): Promise<Contents.ICheckpointModel> {
    return this.contents.createCheckpoint(this.path);
  }

  listCheckpoints(): Promise<Contents.ICheckpointModel[]> {
    return this.contents.listCheckpoints(this.path);
  }

  async restoreCheckpoint(id: string): Promise<void> {
    await this.contents.restoreCheckpoint(this.path, id);
  }

  /** rename moves the file to a new name in the same directory; returns the new path. */
  async rename(newName: string): Promise<string> {
    const dir = this.path.includes('/') ? this.path.slice(0, this.path.lastIndexOf('/') + 1) : '';
    const target = dir + newName;
    const m = await this.contents.rename(this.path, target);
    this.path = m.path;
    this.lastModified = m.last_modified;
    return m.path;
  }
}

/** basename is a path's last part. */
export function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** withIpynb adds ".ipynb" to a name that has no extension of it. */
export function withIpynb(name: string): string {
  return name.toLowerCase().endsWith('.ipynb') ? name : name + '.ipynb';
}

/** Autosave calls save every interval while the notebook is dirty. */
export class Autosave {
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private isDirty: () => boolean,
    private save: () => Promise<unknown>,
    private intervalMs = 120000,
  ) {}

  start(): void {
    this.stop();
    this.timer = setInterval(() => {
      if (this.isDirty()) {
        void this.save();
      }
    }, this.intervalMs);
  }

  stop(): void {
    if (this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
