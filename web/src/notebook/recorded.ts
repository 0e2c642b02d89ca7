// Outputs the server wrote while this page was away (docs/api.md, "Outputs that outlive the
// browser"): when the page's connection drops during a run (a laptop closed, a network gone),
// nbkube writes the run's outputs into the notebook on the server, which makes the page's
// next save a conflict. If outputs are all the server's copy gained, the page takes them
// into the cells the user has not run again here, and saves over that copy without asking.
import type * as nbformat from '@jupyterlab/nbformat';
import type { CellModel } from './model';

/** A run the server recorded for a cell of the page. */
export interface RecordedRun {
  index: number;
  outputs: nbformat.IOutput[];
  executionCount: number | null;
  /** The cell's metadata.execution on the server (JupyterLab's timing record), if any. */
  execution: unknown;
}

type JSONish = unknown;

/** sameJSON compares two decoded JSON values, key order aside. */
export function sameJSON(a: JSONish, b: JSONish): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((x, i) => sameJSON(x, b[i]));
  }
  const ao = a as Record<string, JSONish>;
  const bo = b as Record<string, JSONish>;
  const keys = Object.keys(ao).filter((k) => ao[k] !== undefined);
  if (keys.length !== Object.keys(bo).filter((k) => bo[k] !== undefined).length) return false;
  return keys.every((k) => k in bo && sameJSON(ao[k], bo[k]));
}

/** sourceText is a stored source (a string, or a list of lines) as one string. */
function sourceText(s: nbformat.MultilineString | undefined): string {
  return Array.isArray(s) ? s.join('') : (s ?? '');
}

/** Fields a save does not keep (nbformat strips them), or that runs write. */
const transientNotebook = ['orig_nbformat', 'orig_nbformat_minor', 'signature'];
const runCellMetadata = ['execution', 'trusted'];

function without(md: unknown, keys: string[]): Record<string, unknown> {
  const rest = { ...((md ?? {}) as Record<string, unknown>) };
  for (const k of keys) delete rest[k];
  return rest;
}

/** cellMetadataOfRuns is a cell's metadata less what runs write: the timing record, and the
 * mark of a run going on (metadata.nbkube.running, which the kernel's agent writes and takes
 * away), with metadata.nbkube when that was its only key. */
function cellMetadataOfRuns(md: unknown): Record<string, unknown> {
  const rest = without(md, runCellMetadata);
  const own = rest.nbkube;
  if (own && typeof own === 'object' && !Array.isArray(own) && 'running' in own) {
    const left = without(own, ['running']);
    if (Object.keys(left).length === 0) {
      delete rest.nbkube;
    } else {
      rest.nbkube = left;
    }
  }
  return rest;
}

/** withoutRuns is what of a notebook a run does not change: the notebook's metadata, and each
 * cell's id, type, source (as one string), attachments and metadata (less what runs write). */
function withoutRuns(nb: nbformat.INotebookContent): JSONish {
  return {
    metadata: without(nb.metadata, transientNotebook),
    cells: nb.cells.map((c) => ({
      id: c.id,
      type: c.cell_type,
      source: sourceText(c.source),
      attachments: (c as { attachments?: unknown }).attachments,
      metadata: cellMetadataOfRuns(c.metadata),
    })),
  };
}

/** recordedRuns is what the page takes of server, the file's copy now, given base, the copy
 * the page loaded or last saved, and its cells. Null when the server's copy differs from base
 * in more than runs (someone changed the notebook: the user decides). Else the runs the server
 * wrote that the page is to show: those of cells whose source is still the page's, unless the
 * page ran the cell again since (a higher execution count than the server's). A run the page
 * saw only part of (its connection dropped) has no count, or the server's, and the server's
 * whole run replaces it. */
export function recordedRuns(
  base: nbformat.INotebookContent,
  server: nbformat.INotebookContent,
  cells: readonly CellModel[],
): RecordedRun[] | null {
  if (!sameJSON(withoutRuns(base), withoutRuns(server))) {
    return null;
  }
  const baseByID = new Map(base.cells.map((c) => [c.id, c]));
  const runs: RecordedRun[] = [];
  for (const s of server.cells) {
    const b = baseByID.get(s.id);
    const index = cells.findIndex((c) => c.id === s.id);
    if (s.cell_type !== 'code' || !b || index < 0) continue;
    const page = cells[index];
    const sc = s as nbformat.ICodeCell;
    const bc = b as nbformat.ICodeCell;
    const serverRan = !sameJSON(sc.outputs, bc.outputs) || sc.execution_count !== bc.execution_count;
    if (!serverRan || page.type !== 'code' || page.source !== sourceText(sc.source)) continue;
    const pageNewer =
      page.executionCount !== null && sc.execution_count !== null && page.executionCount > sc.execution_count;
    const same = sameJSON(page.outputs, sc.outputs) && page.executionCount === sc.execution_count;
    if (!pageNewer && !same) {
      runs.push({
        index,
        outputs: sc.outputs,
        executionCount: sc.execution_count,
        execution: (sc.metadata as Record<string, unknown>).execution,
      });
    }
  }
  return runs;
}
