// The page's configuration, which the server writes into the page as a JSON data block
// (<script id="nbkube-config" type="application/json">): data, never code, so the pages'
// Content-Security-Policy can refuse every inline script.

export type PageKind = 'dashboard' | 'notebook' | 'print' | 'editor' | 'viewer' | 'terminal';

export interface PageConfig {
  /** The server's base URL path, ending in "/" (e.g. "/" or "/user/ann/"). */
  baseUrl: string;
  /** Which page this is. */
  page: PageKind;
  /** The contents path the page shows: a directory (dashboard), a notebook or a file. */
  path: string;
  /** The notebook's id (notebook and print pages). */
  notebookId?: string;
  /** The terminal's name (the terminal page). */
  terminal?: string;
  /** The user the server knows the browser as. */
  user: string;
  /** Whether the user can log out (a login cookie exists). */
  canLogout: boolean;
  /** Whether the server runs terminals (JupyterLab's page config option of that name). */
  terminalsAvailable?: boolean;
}

let cached: PageConfig | undefined;

/** config reads the page's configuration once. */
export function config(): PageConfig {
  if (cached) {
    return cached;
  }
  const el = document.getElementById('nbkube-config');
  if (!el || !el.textContent) {
    throw new Error('nbkube: the page has no configuration');
  }
  cached = JSON.parse(el.textContent) as PageConfig;
  return cached;
}

/** url is a path under the base URL; parts are joined with "/" and each is URL-encoded. */
export function url(...parts: string[]): string {
  const path = parts
    .flatMap((p) => p.split('/'))
    .filter((p) => p !== '')
    .map(encodeURIComponent)
    .join('/');
  return config().baseUrl + path;
}

/** treeURL is the dashboard page of a directory. */
export function treeURL(dir: string): string {
  return dir === '' ? config().baseUrl : url('tree', dir);
}

/** notebookURL is the page of a notebook by its path (the server sends it on to its id). */
export function notebookURL(path: string): string {
  return url('tree', path);
}

/** fileURL is where a file other than a notebook opens: the viewer for what a browser shows
 * by itself (viewKind), else the editor (whose server sends a file that is not text on to the
 * viewer). */
export function fileURL(path: string): string {
  return url(viewKind(path) ? 'view' : 'edit', path);
}

/** editURL is the editor's page of a file. */
export function editURL(path: string): string {
  return url('edit', path);
}

/** terminalURL is a terminal's page (Notebook 6's address). */
export function terminalURL(name: string): string {
  return url('terminals', name);
}

/** filesURL is a file's bytes (/files/), as an attachment when download. */
export function filesURL(path: string, download = false): string {
  return url('files', path) + (download ? '?download=1' : '');
}

/** ViewKind is how the viewer shows a file. */
export type ViewKind = 'image' | 'pdf' | 'html';

const viewKinds = new Map<string, ViewKind>([
  ...['png', 'jpg', 'jpeg', 'gif', 'webp', 'avif', 'bmp', 'ico', 'svg'].map((e) => [e, 'image'] as const),
  ['pdf', 'pdf'],
  ['html', 'html'],
  ['htm', 'html'],
]);

/** viewKind is how a browser shows a file by itself, by its name's extension; undefined when
 * it does not (the file is edited as text, or downloaded). */
export function viewKind(path: string): ViewKind | undefined {
  const name = path.slice(path.lastIndexOf('/') + 1);
  const dot = name.lastIndexOf('.');
  return dot > 0 ? viewKinds.get(name.slice(dot + 1).toLowerCase()) : undefined;
}
