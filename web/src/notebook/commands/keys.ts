// Key names as Notebook 6 writes them ("Shift-Enter", "Ctrl-Shift-Minus", "D,D" for two keys
// in a row): what a keyboard event is called, and how a binding is shown to a person.

/** The part of a KeyboardEvent the mapping looks at. */
export interface Key {
  key: string;
  shiftKey?: boolean;
  ctrlKey?: boolean;
  altKey?: boolean;
  metaKey?: boolean;
}

const NAMES: Record<string, string> = {
  ArrowUp: 'Up',
  ArrowDown: 'Down',
  ArrowLeft: 'Left',
  ArrowRight: 'Right',
  Escape: 'Esc',
  ' ': 'Space',
  '-': 'Minus',
  _: 'Minus',
};

/** keyName names a key with its modifiers: Ctrl (or Cmd), Alt, Shift, then the key (a letter
 * upper-cased). */
export function keyName(k: Key): string {
  const base = NAMES[k.key] ?? (k.key.length === 1 ? k.key.toUpperCase() : k.key);
  return (k.ctrlKey || k.metaKey ? 'Ctrl-' : '') + (k.altKey ? 'Alt-' : '') + (k.shiftKey ? 'Shift-' : '') + base;
}

/** hasCtrlOrAlt tells a key name with Ctrl or Alt. */
export function hasCtrlOrAlt(name: string): boolean {
  return name.startsWith('Ctrl-') || name.startsWith('Alt-');
}

/** sequence splits a binding ("D,D") into its keys. */
export function sequence(binding: string): string[] {
  return binding.split(',').map((s) => s.trim());
}

/** shown is a binding as a person reads it: "D, D"; "Ctrl-Shift-−". */
export function shown(binding: string): string {
  return sequence(binding).join(', ');
}

/** ariaKeys is a binding in aria-keyshortcuts' form ("Control+Shift+P"; a sequence "D D"). */
export function ariaKeys(binding: string): string {
  const one = (k: string) =>
    k
      .split('-')
      .map((p) =>
        p === 'Ctrl' ? 'Control' : p === 'Esc' ? 'Escape' : p === 'Up' ? 'ArrowUp' : p === 'Down' ? 'ArrowDown' : p,
      )
      .join('+');
  return sequence(binding).map(one).join(' ');
}
