// Loading and saving a file (a notebook, or a text file) through the contents API: a save is
// conditional on the version loaded or last saved (If-Match with the entity tag the server
// gave), so that a file changed since, by another tab, user or kernel, is never overwritten
// unasked, not even by a save racing with the change (nbkube answers 409 "changed on disk");
// checkpoints; rename. Loads and saves use the service client's request layer
// (ServerConnection), which the contents manager does not let set headers or read them.
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection, type Contents } from '@jupyterlab/services';
import { alert, askOnConflict, messageOf } from './dialogs';
import { serverSettings, type Services } from './server';

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

/** FileVersion is a version of the file on the server. */
export interface FileVersion<T> {
  content: T;
  etag: string | undefined;
  lastModified: string | undefined;
  path: string;
}

/** saveVerdict is what the answer to a conditional save means: 'conflict' when the file
 * changed since the version the save was conditional on (nbkube's 409 "changed on disk", or
 * the 412 of a server that checks If-Match so), 'saved' on success, else 'failed'. */
export function saveVerdict(status: number, reason?: string): SaveResult {
  if (status === 412 || (status === 409 && reason === 'changed on disk')) {
    return 'conflict';
  }
  return status >= 200 && status < 300 ? 'saved' : 'failed';
}

/** FileType is what a Saver loads and saves: a notebook (JSON) or a text file. */
export type FileType = 'notebook' | 'text';

/** The contents API's query and model fields of each file type. */
const asked: Record<FileType, { query: string; type: string; format: string }> = {
  notebook: { query: 'type=notebook&content=1', type: 'notebook', format: 'json' },
  text: { query: 'type=file&format=text&content=1', type: 'file', format: 'text' },
};

/** contentsURL is the contents API's URL of path. */
function contentsURL(path: string): string {
  return URLExt.join(serverSettings().baseUrl, 'api/contents', URLExt.encodeParts(path));
}

/** Saver loads and saves a file of one type, whose content is a T. */
export class Saver<T> {
  path: string;
  lastModified: string | undefined;
  /** etag names the version of the file loaded or last saved (the server's ETag header). */
  etag: string | undefined;
  /** base is a copy of the content of that version, as loaded or saved. */
  base: T | undefined;
  private saving: Promise<unknown> = Promise.resolve();

  constructor(
    private manager: Services,
    path: string,
    private type: FileType,
  ) {
    this.path = path;
  }

  private get contents(): Contents.IManager {
    return this.manager.contents;
  }

  /** load fetches the file and remembers its version. */
  async load(): Promise<T> {
    const v = await this.fetch();
    this.adopt(v);
    this.path = v.path;
    return v.content;
  }

  /** fetch reads the file as it is on the server, without taking its version as the one
   * saves are conditional on (adopt does that). */
  async fetch(): Promise<FileVersion<T>> {
    const settings = serverSettings();
    const response = await ServerConnection.makeRequest(
      contentsURL(this.path) + '?' + asked[this.type].query,
      {},
      settings,
    );
    if (!response.ok) {
      throw await ServerConnection.ResponseError.create(response);
    }
    const m = (await response.json()) as Contents.IModel;
    return {
      content: m.content as T,
      etag: response.headers.get('ETag') ?? undefined,
      lastModified: m.last_modified,
      path: m.path,
    };
  }

  /** adopt makes v the version the next save is conditional on. */
  adopt(v: FileVersion<T>): void {
    this.etag = v.etag;
    this.lastModified = v.lastModified;
    this.base = structuredClone(v.content);
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

  /** save writes content over the version loaded or last saved ('conflict' when the file
   * changed since), or over whatever is there when force. */
  save(content: T, force = false): Promise<SaveResult> {
    const run = async (): Promise<SaveResult> => {
      const headers: Record<string, string> = { 'Content-Type': 'application/json' };
      if (!force && this.etag) {
        headers['If-Match'] = this.etag;
      } else if (!force && (await this.changedOnServer())) {
        // A server that gave no version: the check before the save, as JupyterLab does.
        return 'conflict';
      }
      // What is sent, as it is when sent: the page goes on changing its content (a kernel's
      // language_info arrives) while the request is under way.
      const sent = structuredClone(content);
      const response = await ServerConnection.makeRequest(
        contentsURL(this.path),
        {
          method: 'PUT',
          headers,
          body: JSON.stringify({ type: asked[this.type].type, format: asked[this.type].format, content: sent }),
        },
        serverSettings(),
      );
      if (!force && (response.status === 409 || response.status === 412)) {
        const err = (await response.json().catch(() => ({}))) as { reason?: string };
        if (saveVerdict(response.status, err.reason) === 'conflict') {
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
      this.base = sent;
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

/** savedAt is the save state shown after a save at t. */
export function savedAt(t: Date): string {
  return `Saved at ${String(t.getHours()).padStart(2, '0')}:${String(t.getMinutes()).padStart(2, '0')}`;
}

/** saveAsking saves content with saver, showing its state with show, and asks the user what to
 * do when the file changed on the server: overwrite it (saved again, over whatever is there)
 * or reload it. Before asking, resolve (when given) may settle the conflict itself: when it
 * has made the page's content current with the server's copy and adopted that version, it
 * says so, and the save is tried again, conditional on that version. It resolves with
 * 'saved', 'reload' (the page is to load the file again), 'kept' (the user chose neither)
 * or 'failed' (told in a dialog unless quiet). */
export async function saveAsking<T>(
  saver: Saver<T>,
  content: () => T,
  what: 'Notebook' | 'File',
  show: (state: string) => void,
  force = false,
  quiet = false,
  resolve?: () => Promise<boolean>,
): Promise<'saved' | 'reload' | 'kept' | 'failed'> {
  show('Saving…');
  let r: SaveResult;
  try {
    r = await saver.save(content(), force);
  } catch (err) {
    show('Save failed');
    if (!quiet) void alert('Save failed', messageOf(err));
    return 'failed';
  }
  if (r === 'conflict') {
    if (resolve && (await resolve().catch(() => false))) {
      return saveAsking(saver, content, what, show, false, quiet);
    }
    show('');
    const c = await askOnConflict(what);
    if (c === 'overwrite') {
      return saveAsking(saver, content, what, show, true, quiet);
    }
    return c === 'reload' ? 'reload' : 'kept';
  }
  show(savedAt(new Date()));
  return 'saved';
}
