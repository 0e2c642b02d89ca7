// Find and replace across the notebook's cells (in their sources): the search itself, free
// of DOM, and the dialog (Find next, Replace, Replace all).
import { h } from '../shell/dom';
import { openDialog } from '../shell/dialogs';
import type { NotebookPage } from './notebook';

export interface Match {
  cell: number;
  from: number;
  to: number;
}

/** findAll finds every match of query in the sources, in order. */
export function findAll(sources: string[], query: string, matchCase: boolean): Match[] {
  if (query === '') return [];
  const q = matchCase ? query : query.toLowerCase();
  const out: Match[] = [];
  sources.forEach((s, cell) => {
    const text = matchCase ? s : s.toLowerCase();
    for (let i = text.indexOf(q); i >= 0; i = text.indexOf(q, i + q.length)) {
      out.push({ cell, from: i, to: i + q.length });
    }
  });
  return out;
}

/** nextMatch is the first match at or after (cell, offset), going round to the top. */
export function nextMatch(matches: Match[], cell: number, offset: number): Match | undefined {
  return matches.find((m) => m.cell > cell || (m.cell === cell && m.from >= offset)) ?? matches[0];
}

/** replaceIn replaces the matches of one cell's source (from the end, so offsets hold). */
export function replaceIn(source: string, matches: Match[], replacement: string): string {
  let s = source;
  for (const m of [...matches].sort((a, b) => b.from - a.from)) {
    s = s.slice(0, m.from) + replacement + s.slice(m.to);
  }
  return s;
}

/** openFind shows the find and replace dialog over the page. */
export async function openFind(p: NotebookPage): Promise<void> {
  const find = h('input', { type: 'text', class: 'nb-dialog-input', 'aria-label': 'Find' });
  const repl = h('input', { type: 'text', class: 'nb-dialog-input', 'aria-label': 'Replace with' });
  const matchCase = h('input', { type: 'checkbox' });
  const status = h('p', { class: 'nb-find-status', role: 'status', 'aria-live': 'polite' }, '');
  const button = (label: string, f: () => void) => {
    const b = h('button', { type: 'button' }, label);
    b.addEventListener('click', f);
    return b;
  };
  // Where the search goes on from: the cell and offset after the last match shown.
  let at = { cell: p.sel.head, offset: 0 };
  let current: Match | undefined;
  const sources = () => p.model.cells.map((c) => c.source);
  const matches = () => findAll(sources(), find.value, matchCase.checked);
  const show = (m: Match | undefined, total: number) => {
    current = m;
    if (!m) {
      status.textContent = find.value === '' ? '' : 'Not found.';
      return;
    }
    status.textContent = `Cell ${m.cell + 1}: ${total} ${total === 1 ? 'match' : 'matches'} in all.`;
    p.select(m.cell, false, false);
    const v = p.views[m.cell];
    v?.node.scrollIntoView?.({ block: 'nearest' });
    v?.editor?.dispatch({ selection: { anchor: m.from, head: m.to }, scrollIntoView: true });
    at = { cell: m.cell, offset: m.to };
  };
  const findNext = () => {
    const all = matches();
    show(nextMatch(all, at.cell, at.offset), all.length);
  };
  const replaceOne = () => {
    const all = matches();
    const m = current && all.find((x) => x.cell === current?.cell && x.from === current.from);
    if (m) {
      p.model.setSource(m.cell, replaceIn(sources()[m.cell], [m], repl.value));
      at = { cell: m.cell, offset: m.from + repl.value.length };
    }
    findNext();
  };
  const replaceAll = () => {
    const all = matches();
    const src = sources();
    for (let i = 0; i < src.length; i++) {
      const mine = all.filter((m) => m.cell === i);
      if (mine.length > 0) p.model.setSource(i, replaceIn(src[i], mine, repl.value));
    }
    current = undefined;
    status.textContent = `Replaced ${all.length} ${all.length === 1 ? 'match' : 'matches'}.`;
  };
  const { dialog, result } = openDialog(
    'Find and replace',
    [
      h('label', { class: 'nb-dialog-label' }, 'Find', find),
      h('label', { class: 'nb-dialog-label' }, 'Replace with', repl),
      h('label', {}, matchCase, ' Match case'),
      h(
        'div',
        { class: 'nb-dialog-buttons' },
        button('Find next', findNext),
        button('Replace', replaceOne),
        button('Replace all', replaceAll),
      ),
      status,
    ],
    [{ value: 'cancel', label: 'Close' }],
  );
  dialog.classList.add('nb-find');
  // Enter in a field finds (or replaces) rather than closing the dialog.
  dialog.querySelector('form')?.addEventListener('submit', (e) => {
    const a = document.activeElement;
    if (a !== find && a !== repl) return;
    e.preventDefault();
    if (a === find) findNext();
    else replaceOne();
  });
  find.focus();
  await result;
  p.refocus();
}
