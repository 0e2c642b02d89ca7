// Editing a cell's tags and metadata: a dialog with the tags as a list (one per line) and the
// rest of the metadata as JSON.
import { h } from '../shell/dom';
import { alert, openDialog } from '../shell/dialogs';
import type { CellModel } from './model';
import type { NotebookPage } from './notebook';

/** splitMetadata is what the dialog shows: the tags, and the rest as indented JSON. */
export function splitMetadata(metadata: Record<string, unknown>): { tags: string[]; json: string } {
  const { tags, ...rest } = metadata;
  return {
    tags: Array.isArray(tags) ? tags.map(String) : [],
    json: JSON.stringify(rest, null, 2),
  };
}

/** joinMetadata reads the dialog back: tags one per line (or separated by commas), the
 * rest JSON that must be an object; throws on bad JSON. */
export function joinMetadata(tagsText: string, json: string): Record<string, unknown> {
  const rest: unknown = json.trim() === '' ? {} : JSON.parse(json);
  if (typeof rest !== 'object' || rest === null || Array.isArray(rest)) {
    throw new Error('The metadata must be a JSON object.');
  }
  const tags = [...new Set(tagsText.split(/[\n,]/).map((t) => t.trim()))].filter((t) => t !== '');
  const out: Record<string, unknown> = { ...(rest as Record<string, unknown>) };
  delete out.tags;
  if (tags.length > 0) out.tags = tags;
  return out;
}

/** editMetadata asks for the selected cell's tags and metadata and sets them. */
export async function editMetadata(p: NotebookPage): Promise<void> {
  const i = p.sel.head;
  const cell = p.model.cells[i];
  if (!cell) return;
  const { tags, json } = splitMetadata(cell.metadata);
  const tagsBox = h('textarea', { class: 'nb-dialog-input', rows: '3', 'aria-label': 'Tags, one per line' });
  tagsBox.value = tags.join('\n');
  const jsonBox = h('textarea', {
    class: 'nb-dialog-input nb-meta-json',
    rows: '10',
    spellcheck: 'false',
    'aria-label': 'Metadata (JSON)',
  });
  jsonBox.value = json;
  const { result } = openDialog(
    `Cell ${i + 1}: tags and metadata`,
    [
      h('label', { class: 'nb-dialog-label' }, 'Tags, one per line', tagsBox),
      h('label', { class: 'nb-dialog-label' }, 'Metadata (JSON)', jsonBox),
    ],
    [
      { value: 'cancel', label: 'Cancel' },
      { value: 'ok', label: 'Set', primary: true },
    ],
  );
  tagsBox.focus();
  const r = await result;
  p.refocus();
  if (r !== 'ok') return;
  try {
    p.model.setMetadata(i, joinMetadata(tagsBox.value, jsonBox.value) as CellModel['metadata']);
  } catch (err) {
    await alert('Metadata not set', err instanceof Error ? err.message : String(err));
    p.refocus();
  }
}
