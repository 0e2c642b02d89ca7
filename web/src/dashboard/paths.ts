// Contents paths as the API spells them: "/"-separated, relative to the user's root, no
// leading or trailing slash ('' is the root).

/** joinPath joins a directory and a name (or a relative path) into one contents path. */
export function joinPath(dir: string, name: string): string {
  const parts = [...dir.split('/'), ...name.split('/')].filter((p) => p !== '');
  return parts.join('/');
}

/** parentDir is the directory a path is in ('' for the root and what is in it). */
export function parentDir(path: string): string {
  const parts = path.split('/').filter((p) => p !== '');
  parts.pop();
  return parts.join('/');
}

/** baseName is a path's last part. */
export function baseName(path: string): string {
  const parts = path.split('/').filter((p) => p !== '');
  return parts.length ? parts[parts.length - 1] : '';
}

export interface Crumb {
  /** What the crumb shows. */
  name: string;
  /** The directory it leads to ('' for the root). */
  path: string;
}

/** breadcrumbs are the directories from the root down to dir, the root first. */
export function breadcrumbs(dir: string, rootName = 'Home'): Crumb[] {
  const crumbs: Crumb[] = [{ name: rootName, path: '' }];
  let path = '';
  for (const p of dir.split('/')) {
    if (p === '') {
      continue;
    }
    path = path ? path + '/' + p : p;
    crumbs.push({ name: p, path });
  }
  return crumbs;
}

/** isNotebook reports whether a file name is a notebook's. */
export function isNotebook(name: string): boolean {
  return name.toLowerCase().endsWith('.ipynb');
}

/** stemLength is how much of a name to select when renaming it: all but the extension
 * (a leading dot is no extension: ".bashrc" is selected whole). */
export function stemLength(name: string, isDir = false): number {
  if (isDir) {
    return name.length;
  }
  const dot = name.lastIndexOf('.');
  return dot > 0 ? dot : name.length;
}

/** badName says why a new name cannot be used ('' when it can). */
export function badName(name: string): string {
  if (name.trim() === '') {
    return 'A name cannot be empty.';
  }
  if (name.includes('/')) {
    return 'A name cannot contain "/".';
  }
  if (name === '.' || name === '..') {
    return `"${name}" cannot be a name.`;
  }
  return '';
}
