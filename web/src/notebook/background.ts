// Run all in the background: the server runs the notebook's code cells with no client
// (POST /api/kernels/<id>/execute, docs/api.md "Server-side execution"), so they go on, and
// their outputs land in the notebook, when the page is closed. The server runs the stored
// sources, so the page saves first; it then follows each cell's run on the kernel's IOPub
// while it stays open.
import murmurhash from 'murmurhash';
import { api } from '../shell/server';
import { alert, messageOf } from '../shell/dialogs';
import type { NotebookPage } from './notebook';

/** sourceHash is a cell source's source_hash: MurmurHash2, 32 bits, seed 0, of its UTF-8
 * bytes, in decimal. */
export function sourceHash(source: string): string {
  return String(murmurhash.v2(new TextEncoder().encode(source), 0));
}

/** msgIdOf is the msg_id of the execute_request of a cell of a named request. */
export function msgIdOf(requestId: string, cellId: string): string {
  return `${requestId}:${cellId}`;
}

/** runAllInBackground asks the server to run every code cell of the saved notebook. */
export async function runAllInBackground(p: NotebookPage): Promise<void> {
  if (p.model.dirty) {
    await p.save();
  }
  if (p.model.dirty) {
    await alert('Run in the background', 'The notebook could not be saved; the server runs what is saved.');
    return;
  }
  const views = p.views.filter((v) => v.cell.type === 'code' && v.cell.source.trim() !== '');
  if (views.length === 0) return;
  let followed: typeof views = [];
  try {
    await p.ensureKernel();
    const k = p.kernel.kernel;
    if (!k) throw new Error('no kernel');
    const file = await api<{ id: string }>(`api/fileid/id?path=${encodeURIComponent(p.path)}`);
    const requestId = crypto.randomUUID();
    // Followed before they are sent: the first cell starts before the answer comes.
    for (const v of views) {
      p.followRun(v, msgIdOf(requestId, v.cell.id), true);
    }
    followed = views;
    await api<null>(`api/kernels/${encodeURIComponent(k.id)}/execute`, {
      method: 'POST',
      body: JSON.stringify({
        document_id: `json:notebook:${file.id}`,
        cells: views.map((v) => ({ cell_id: v.cell.id, source_hash: sourceHash(v.cell.source) })),
        request_id: requestId,
      }),
    });
  } catch (err) {
    for (const v of followed) p.unfollowRun(v);
    await alert('Run in the background', 'The server did not take the cells: ' + messageOf(err));
  }
}
