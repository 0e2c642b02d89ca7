// Loading and saving the notebook through the contents API: a save is conditional on the
// version loaded or last saved (If-Match with the entity tag the server gave), so that a file
// changed since, by another tab, user or kernel, is never overwritten unasked, not even by a
// save racing with the change (nbkube answers 409 "changed on disk"); autosave when dirty;
// checkpoints; rename. Loads and saves use the service client's request layer
// (ServerConnection), which the contents manager does not let set headers or read them.
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection, type Contents } from '@jupyterlab/services';
import { serverSettings, type Services } from '../shell/server';
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

/** contentsURL is the contents API's URL of path. */
function contentsURL(path: string): string {
  return URLExt.join(serverSettings().baseUrl, 'api/contents', URLExt.encodeParts(path));
}

export class Saver {
  path: string;
  lastModified: string | undefined;
  /** etag names the version of the file loaded or last saved (the server's ETag header). */
  etag: string | undefined;
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

  /** load fetches the notebook and remembers its version. */
  async load(): Promise<nbformat.INotebookContent> {
    const settings = serverSettings();
    const response = await ServerConnection.makeRequest(
      contentsURL(this.path) + '?type=notebook&content=1',
      {},
      settings,
    );
    if (!response.ok) {
      throw await ServerConnection.ResponseError.create(response);
    }
    const m = (await response.json()) as Contents.IModel;
    this.etag = response.headers.get('ETag') ?? undefined;
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

  /** save writes the notebook over the version loaded or last saved ('conflict' when the
   * file changed since), or over whatever is there when force. */
  save(nb: nbformat.INotebookContent, force = false): Promise<SaveResult> {
    const run = async (): Promise<SaveResult> => {
      const headers: Record<string, string> = { 'Content-Type': 'application/json' };
      if (!force && this.etag) {
        headers['If-Match'] = this.etag;
      } else if (!force && (await this.changedOnServer())) {
        // A server that gave no version: the check before the save, as JupyterLab does.
        return 'conflict';
      }
      const response = await ServerConnection.makeRequest(
        contentsURL(this.path),
        { method: 'PUT', headers, body: JSON.stringify({ type: 'notebook', format: 'json', content: nb }) },
        serverSettings(),
      );
      if (response.status === 409 && !force) {
        const err = (await response.json().catch(() => ({}))) as { reason?: string };
        if (err.reason === 'changed on disk') {
          return 'conflict';
        }
        throw new Error(`Save failed: ${JSON.stringify(err)}`);
      }
      if (!response.ok) {
        throw await ServerConnection.ResponseError.create(response);
      }
      const m = (await response.json()) as Contents.IModel;
      this.etag = response.headers.get('ETag') ?? undefined;
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

  /** refreshVersion asks the server for the version of the file as it is now. */
  private async refreshVersion(): Promise<void> {
    const response = await ServerConnection.makeRequest(contentsURL(this.path) + '?content=0', {}, serverSettings());
    this.etag = response.ok ? (response.headers.get('ETag') ?? undefined) : undefined;
  }

  /** rename moves the file to a new name in the same directory; returns the new path. */
  async rename(newName: string): Promise<string> {
    const dir = this.path.includes('/') ? this.path.slice(0, this.path.lastIndexOf('/') + 1) : '';
    const target = dir + newName;
    const m = await this.contents.rename(this.path, target);
    this.path = m.path;
    this.lastModified = m.last_modified;
    // A rename changes the file's version (its change time): ask for the new one.
    await this.refreshVersion();
    return m.path;
  }
}

/** basename is a path's last part. */
export function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** dirname is the directory of a path, '' for the root. */
export function dirname(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? '' : path.slice(0, i);
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
