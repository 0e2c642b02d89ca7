// The notebook model: the cells and their operations, free of DOM, so that they are tested
// alone. The page's views follow the model through onChange.
import type * as nbformat from '@jupyterlab/nbformat';
/** A cell's metadata, as nbformat types it. */
type PartialJSONObject = nbformat.ICell['metadata'];

export type CellType = 'code' | 'markdown' | 'raw';

export interface CellModel {
  /** nbformat 4.5 cell id (kept from the file, made for new cells). */
  id: string;
  type: CellType;
  source: string;
  metadata: PartialJSONObject;
  /** Code cells' outputs (nbformat 4); empty for the others. */
  outputs: nbformat.IOutput[];
  executionCount: number | null;
  /** Markdown and raw cells' attachments, kept as they were. */
  attachments?: nbformat.IAttachments;
}

/** What changed, so that a view redraws no more than it must. */
export type Change =
  | { kind: 'insert'; index: number; count: number }
  | { kind: 'remove'; index: number; count: number }
  | { kind: 'move'; from: number; to: number }
  | { kind: 'type'; index: number }
  | { kind: 'source'; index: number }
  | { kind: 'reset' };

let idCounter = 0;

/** newCellId makes a cell id as nbformat 4.5 asks: 1–64 of [a-zA-Z0-9-_]. */
export function newCellId(): string {
  const c = globalThis.crypto as Crypto | undefined;
  if (c && typeof c.randomUUID === 'function') {
    return c.randomUUID().replace(/-/g, '').slice(0, 12);
  }
  idCounter++;
  return 'c' + Date.now().toString(36) + idCounter.toString(36);
}

function joined(v: nbformat.MultilineString | undefined): string {
  return Array.isArray(v) ? v.join('') : (v ?? '');
}

/** makeCell makes a new, empty cell. */
export function makeCell(type: CellType = 'code', source = ''): CellModel {
  return { id: newCellId(), type, source, metadata: {}, outputs: [], executionCount: null };
}

/** cloneCell copies a cell with a new id (pasting a copy must not repeat an id). */
export function cloneCell(c: CellModel): CellModel {
  return {
    ...structuredCloneJSON(c),
    id: newCellId(),
  };
}

function structuredCloneJSON<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** cellFromJSON reads one nbformat 4 cell. */
export function cellFromJSON(c: nbformat.ICell): CellModel {
  const type: CellType = c.cell_type === 'markdown' || c.cell_type === 'raw' ? c.cell_type : 'code';
  const cell: CellModel = {
    id: typeof c.id === 'string' && c.id !== '' ? c.id : newCellId(),
    type,
    source: joined(c.source),
    metadata: c.metadata ?? {},
    outputs: type === 'code' ? ((c as nbformat.ICodeCell).outputs ?? []) : [],
    executionCount: type === 'code' ? ((c as nbformat.ICodeCell).execution_count ?? null) : null,
  };
  const att = (c as nbformat.IMarkdownCell).attachments;
  if (type !== 'code' && att) {
    cell.attachments = att;
  }
  return cell;
}

/** cellToJSON writes one cell as nbformat 4.5. */
export function cellToJSON(c: CellModel): nbformat.ICell {
  if (c.type === 'code') {
    return {
      id: c.id,
      cell_type: 'code',
      metadata: c.metadata,
      source: c.source,
      outputs: c.outputs,
      execution_count: c.executionCount,
    };
  }
  const out: nbformat.IMarkdownCell | nbformat.IRawCell = {
    id: c.id,
    cell_type: c.type,
    metadata: c.metadata,
    source: c.source,
  };
  if (c.attachments) {
    out.attachments = c.attachments;
  }
  return out;
}

/** The notebook: cells, metadata, a clipboard of cells and the deleted cells for undo. */
export class NotebookModel {
  cells: CellModel[] = [];
  metadata: nbformat.INotebookMetadata = {};
  nbformatMinor = 5;
  private clipboard: CellModel[] = [];
  private deleted: { index: number; cells: CellModel[] }[] = [];
  private listeners: ((c: Change) => void)[] = [];
  private dirtyListeners: ((dirty: boolean) => void)[] = [];
  private _dirty = false;

  static fromJSON(nb: nbformat.INotebookContent): NotebookModel {
    const m = new NotebookModel();
    m.load(nb);
    return m;
  }

  /** load replaces the whole notebook (reload, revert) and marks it clean. */
  load(nb: nbformat.INotebookContent): void {
    this.metadata = nb.metadata ?? {};
    this.nbformatMinor = Math.max(nb.nbformat_minor ?? 5, 5);
    this.cells = (nb.cells ?? []).map(cellFromJSON);
    if (this.cells.length === 0) {
      this.cells.push(makeCell()); // a notebook shows at least one cell, as Jupyter's
    }
    const seen = new Set<string>();
    for (const c of this.cells) {
      if (seen.has(c.id)) {
        c.id = newCellId();
      }
      seen.add(c.id);
    }
    this.deleted = [];
    this.emit({ kind: 'reset' });
    this.setDirty(false);
  }

  toJSON(): nbformat.INotebookContent {
    return {
      metadata: this.metadata,
      nbformat: 4,
      nbformat_minor: this.nbformatMinor,
      cells: this.cells.map(cellToJSON),
    };
  }

  get dirty(): boolean {
    return this._dirty;
  }

  /** version counts changes, so that a save that raced with an edit leaves the notebook dirty. */
  version = 0;

  setDirty(d: boolean): void {
    if (d) {
      this.version++;
    }
    if (d !== this._dirty) {
      this._dirty = d;
      for (const l of this.dirtyListeners) l(d);
    }
  }

  /** markChanged records that something in a cell (source, outputs, count) changed. */
  markChanged(): void {
    if (this.quiet > 0) return;
    this.setDirty(true);
  }

  private quiet = 0;

  /** quietly makes changes that the file gets from elsewhere (the runs the kernel's agent
   * writes, which the page follows): they do not make the notebook unsaved. */
  quietly(fn: () => void): void {
    this.quiet++;
    try {
      fn();
    } finally {
      this.quiet--;
    }
  }

  onChange(l: (c: Change) => void): void {
    this.listeners.push(l);
  }

  onDirty(l: (dirty: boolean) => void): void {
    this.dirtyListeners.push(l);
  }

  private emit(c: Change): void {
    for (const l of this.listeners) l(c);
  }

  private clampIndex(i: number, max = this.cells.length): number {
    return Math.max(0, Math.min(max, i));
  }

  /** insert adds cells at index (0 … length) and returns the first. */
  insert(index: number, ...cells: CellModel[]): CellModel {
    if (cells.length === 0) {
      cells = [makeCell()];
    }
    index = this.clampIndex(index);
    this.cells.splice(index, 0, ...cells);
    this.emit({ kind: 'insert', index, count: cells.length });
    this.setDirty(true);
    return cells[0];
  }

  /** remove deletes count cells at index, remembering them for undoDelete. A notebook keeps
   * at least one cell, as Jupyter's does: deleting the last leaves an empty code cell. */
  remove(index: number, count = 1): CellModel[] {
    if (index < 0 || index >= this.cells.length || count < 1) {
      return [];
    }
    const gone = this.cells.splice(index, count);
    this.deleted.push({ index, cells: gone });
    this.emit({ kind: 'remove', index, count: gone.length });
    if (this.cells.length === 0) {
      this.insert(0, makeCell());
    }
    this.setDirty(true);
    return gone;
  }

  /** undoDelete puts back the last deleted cells; returns their index, or -1. */
  undoDelete(): number {
    const d = this.deleted.pop();
    if (!d) {
      return -1;
    }
    const index = this.clampIndex(d.index);
    this.insert(index, ...d.cells);
    return index;
  }

  get canUndoDelete(): boolean {
    return this.deleted.length > 0;
  }

  /** move moves count cells at index by one place up (delta < 0) or down; returns the
   * index of the first of them. */
  move(index: number, delta: number, count = 1): number {
    const step = delta < 0 ? -1 : 1;
    if (index < 0 || index + count > this.cells.length || count < 1) {
      return index;
    }
    // Moving a block by one is moving the one cell beside it to its other end.
    const from = step < 0 ? index - 1 : index + count;
    if (from < 0 || from >= this.cells.length) {
      return index;
    }
    const to = step < 0 ? index + count - 1 : index;
    const [c] = this.cells.splice(from, 1);
    this.cells.splice(to, 0, c);
    this.emit({ kind: 'move', from, to });
    this.setDirty(true);
    return index + step;
  }

  /** merge joins count cells at index (at least two) into the first, as Jupyter does: their
   * sources joined by a newline; the first keeps its type and id, a code cell loses its
   * outputs (they were not of the merged code). The others go without an undo. */
  merge(index: number, count: number): void {
    if (index < 0 || count < 2 || index + count > this.cells.length) {
      return;
    }
    const first = this.cells[index];
    first.source = mergeSources(this.cells.slice(index, index + count).map((c) => c.source));
    if (first.type === 'code') {
      first.outputs.length = 0;
      first.executionCount = null;
    }
    this.cells.splice(index + 1, count - 1);
    this.emit({ kind: 'remove', index: index + 1, count: count - 1 });
    this.emit({ kind: 'type', index });
    this.setDirty(true);
  }

  /** split cuts the cell at index at the offsets of its source: it keeps the first part (and
   * its outputs), new cells of its type below take the rest. Returns how many cells it is. */
  split(index: number, offsets: number[]): number {
    const c = this.cells[index];
    if (!c) return 0;
    const parts = splitSource(c.source, offsets);
    if (parts.length < 2) return 1;
    this.setSource(index, parts[0]);
    this.insert(index + 1, ...parts.slice(1).map((s) => makeCell(c.type, s)));
    return parts.length;
  }

  /** setType changes a cell's type; a code cell loses its outputs and count on becoming text. */
  setType(index: number, type: CellType): void {
    const c = this.cells[index];
    if (!c || c.type === type) {
      return;
    }
    c.type = type;
    if (type !== 'code') {
      c.outputs = [];
      c.executionCount = null;
    } else {
      delete c.attachments;
    }
    this.emit({ kind: 'type', index });
    this.setDirty(true);
  }

  /** setSource changes a cell's source from outside its editor (find and replace). */
  setSource(index: number, source: string): void {
    const c = this.cells[index];
    if (!c || c.source === source) return;
    c.source = source;
    this.emit({ kind: 'source', index });
    this.setDirty(true);
  }

  /** setMetadata replaces a cell's metadata. */
  setMetadata(index: number, metadata: PartialJSONObject): void {
    const c = this.cells[index];
    if (!c) return;
    c.metadata = metadata;
    this.setDirty(true);
  }

  /** copy puts copies of cells on the model's clipboard. */
  copy(index: number, count = 1): void {
    this.clipboard = this.cells.slice(index, index + count).map((c) => structuredCloneJSON(c));
  }

  /** cut copies cells and deletes them. */
  cut(index: number, count = 1): void {
    this.copy(index, count);
    this.remove(index, count);
  }

  get canPaste(): boolean {
    return this.clipboard.length > 0;
  }

  /** paste inserts the clipboard's cells (with new ids) at index; returns how many. */
  paste(index: number): number {
    if (this.clipboard.length === 0) {
      return 0;
    }
    this.insert(index, ...this.clipboard.map(cloneCell));
    return this.clipboard.length;
  }

  /** language is the kernel's language by the notebook's metadata ("python" if unknown). */
  get language(): string {
    const li = this.metadata.language_info as { name?: string } | undefined;
    const ks = this.metadata.kernelspec as { language?: string } | undefined;
    return (li?.name || ks?.language || 'python').toLowerCase();
  }
}

/** mergeSources joins cells' sources as Jupyter's merge does: one newline between them. */
export function mergeSources(sources: string[]): string {
  return sources.join('\n');
}

/** splitSource cuts a source at offsets (e.g. the cursor, or the ends of the selection): the
 * parts lose the line break they were split at; offsets at either end make no empty part. */
export function splitSource(src: string, offsets: number[]): string[] {
  const cuts = [...new Set(offsets.filter((o) => o > 0 && o < src.length))].sort((a, b) => a - b);
  const parts: string[] = [];
  let at = 0;
  for (const o of [...cuts, src.length]) {
    parts.push(src.slice(at, o));
    at = o;
  }
  return parts.map((p, i) => {
    let q = i > 0 ? p.replace(/^\n/, '') : p;
    q = i < parts.length - 1 ? q.replace(/\n$/, '') : q;
    return q;
  });
}

/** isNew tells a notebook with nothing in it yet: no cell, or one empty cell without outputs. */
export function isNew(nb: nbformat.INotebookContent): boolean {
  const cells = nb.cells ?? [];
  if (cells.length === 0) return true;
  if (cells.length > 1) return false;
  const c = cells[0];
  const source = Array.isArray(c.source) ? c.source.join('') : c.source;
  const outputs = c.cell_type === 'code' ? ((c as nbformat.ICodeCell).outputs ?? []) : [];
  return source === '' && outputs.length === 0;
}
