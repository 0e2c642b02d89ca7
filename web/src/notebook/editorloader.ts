// The editor module (CodeMirror: most of the page's script) is loaded apart from the page, so
// that a notebook shows, with its code highlighted statically, before it has arrived; the
// page starts loading it at once and makes editors when it is there.
type EditorModule = typeof import('./editor');

let mod: EditorModule | null = null;
let loading: Promise<EditorModule> | null = null;

/** loadEditor loads the editor module (once). */
export function loadEditor(): Promise<EditorModule> {
  if (!loading) {
    loading = import('./editor').then((m) => (mod = m));
  }
  return loading;
}

/** editorModule is the editor module if it has arrived. */
export function editorModule(): EditorModule | null {
  return mod;
}
