// The languages of the editors: a notebook cell's by its kernel's language, a text file's by
// its name. The notebook's languages are here at once; the others load as a file needs them,
// so that neither page carries parsers it does not use.
import { markdown } from '@codemirror/lang-markdown';
import { python } from '@codemirror/lang-python';
import { StreamLanguage } from '@codemirror/language';
import { julia } from '@codemirror/legacy-modes/mode/julia';
import { r } from '@codemirror/legacy-modes/mode/r';
import { shell } from '@codemirror/legacy-modes/mode/shell';
import type { Extension } from '@codemirror/state';

/** languageExtension is the CodeMirror language of a kernel language or cell type. */
export function languageExtension(lang: string): Extension {
  switch (lang) {
    case 'python':
    case 'ipython':
    case 'python3':
      return python();
    case 'markdown':
      return markdown();
    case 'r':
      return StreamLanguage.define(r);
    case 'julia':
      return StreamLanguage.define(julia);
    case 'bash':
    case 'sh':
    case 'shell':
      return StreamLanguage.define(shell);
  }
  return [];
}

/** Language is a text file's language, as the editor knows it. */
export type Language =
  | 'python'
  | 'markdown'
  | 'r'
  | 'julia'
  | 'shell'
  | 'makefile'
  | 'yaml'
  | 'toml'
  | 'json'
  | 'sql'
  | 'javascript'
  | 'typescript'
  | 'html'
  | 'css'
  | 'dockerfile'
  | 'properties'
  | 'plain';

/** By whole name (lower case), before the extension is looked at. */
const byName = new Map<string, Language>([
  ['makefile', 'makefile'],
  ['gnumakefile', 'makefile'],
  ['dockerfile', 'dockerfile'],
  ['containerfile', 'dockerfile'],
  ['.bashrc', 'shell'],
  ['.profile', 'shell'],
  ['.gitconfig', 'properties'],
  ['.editorconfig', 'properties'],
]);

const byExtension = new Map<string, Language>([
  ...(['py', 'pyw', 'pyi', 'ipy'] as const).map((e) => [e, 'python'] as const),
  ...(['md', 'markdown'] as const).map((e) => [e, 'markdown'] as const),
  ...(['r', 'rprofile'] as const).map((e) => [e, 'r'] as const),
  ['jl', 'julia'],
  ...(['sh', 'bash', 'zsh', 'ksh'] as const).map((e) => [e, 'shell'] as const),
  ...(['mk', 'mak'] as const).map((e) => [e, 'makefile'] as const),
  ...(['yaml', 'yml'] as const).map((e) => [e, 'yaml'] as const),
  ['toml', 'toml'],
  ...(['json', 'geojson', 'jsonl', 'ipynb'] as const).map((e) => [e, 'json'] as const),
  ['sql', 'sql'],
  ...(['js', 'mjs', 'cjs'] as const).map((e) => [e, 'javascript'] as const),
  ['ts', 'typescript'],
  ...(['html', 'htm'] as const).map((e) => [e, 'html'] as const),
  ['css', 'css'],
  ['dockerfile', 'dockerfile'],
  ...(['cfg', 'ini', 'conf', 'properties', 'env'] as const).map((e) => [e, 'properties'] as const),
]);

/** languageOf is the language of a file by its name (a path's last part is taken): a few by
 * their whole name (Makefile, Dockerfile), the others by their extension; 'plain' for the rest
 * (.txt, .csv, .tsv...). */
export function languageOf(path: string): Language {
  const name = path.slice(path.lastIndexOf('/') + 1).toLowerCase();
  const known = byName.get(name);
  if (known) {
    return known;
  }
  const dot = name.lastIndexOf('.');
  // Then the extension, else the name before it (Dockerfile.dev, Makefile.am).
  return (dot >= 0 && byExtension.get(name.slice(dot + 1))) || byName.get(name.split('.')[0]) || 'plain';
}

/** indentOf is the indentation a language wants: a Makefile's recipes need tabs. */
export function indentOf(lang: Language): string {
  switch (lang) {
    case 'makefile':
      return '\t';
    case 'yaml':
    case 'json':
    case 'javascript':
    case 'typescript':
    case 'html':
    case 'css':
    case 'r':
      return '  ';
  }
  return '    ';
}

/** loadLanguage is the CodeMirror language of a text file's language, its parser loaded. */
export async function loadLanguage(lang: Language): Promise<Extension> {
  switch (lang) {
    case 'python':
    case 'markdown':
    case 'r':
    case 'julia':
    case 'shell':
      return languageExtension(lang);
    case 'makefile':
      // No mode of its own: recipes are shell, and so are its comments and variables mostly.
      return languageExtension('shell');
    case 'yaml':
      return (await import('@codemirror/lang-yaml')).yaml();
    case 'toml':
      return StreamLanguage.define((await import('@codemirror/legacy-modes/mode/toml')).toml);
    case 'json':
      return (await import('@codemirror/lang-json')).json();
    case 'sql':
      return (await import('@codemirror/lang-sql')).sql();
    case 'javascript':
      return (await import('@codemirror/lang-javascript')).javascript();
    case 'typescript':
      return (await import('@codemirror/lang-javascript')).javascript({ typescript: true });
    case 'html':
      return (await import('@codemirror/lang-html')).html();
    case 'css':
      return (await import('@codemirror/lang-css')).css();
    case 'dockerfile':
      return StreamLanguage.define((await import('@codemirror/legacy-modes/mode/dockerfile')).dockerFile);
    case 'properties':
      return StreamLanguage.define((await import('@codemirror/legacy-modes/mode/properties')).properties);
    case 'plain':
      return [];
  }
}
