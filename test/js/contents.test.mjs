// JupyterLab's own services client (the one JupyterLab, VS Code and others build on) drives
// nbkube's contents API: create, save, rename, checkpoint, restore, delete. The Go e2e test
// starts nbkube and runs this with NBKUBE_URL and NBKUBE_TOKEN set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { ContentsManager, ServerConnection } from '@jupyterlab/services';

const baseUrl = process.env.NBKUBE_URL;
const token = process.env.NBKUBE_TOKEN;

function manager() {
  assert.ok(baseUrl && token, 'NBKUBE_URL and NBKUBE_TOKEN must be set');
  const serverSettings = ServerConnection.makeSettings({ baseUrl, token, WebSocket, appendToken: true });
  return new ContentsManager({ serverSettings });
}

test('contents round trip through @jupyterlab/services', async () => {
  const contents = manager();
  const dir = await contents.newUntitled({ type: 'directory' });
  assert.equal(dir.type, 'directory');

  const nb = await contents.newUntitled({ path: dir.path, type: 'notebook' });
  assert.equal(nb.name, 'Untitled.ipynb');
  assert.equal(nb.path, `${dir.path}/Untitled.ipynb`);

  const notebook = {
    cells: [{ cell_type: 'code', execution_count: null, id: 'c1', metadata: {}, outputs: [], source: 'print("hi")' }],
    metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
    nbformat: 4,
    nbformat_minor: 5,
  };
  const saved = await contents.save(nb.path, { type: 'notebook', format: 'json', content: notebook });
  assert.equal(saved.path, nb.path);

  const got = await contents.get(nb.path);
  assert.equal(got.format, 'json');
  assert.equal(got.content.cells[0].source, 'print("hi")');

  const renamed = await contents.rename(nb.path, `${dir.path}/analysis.ipynb`);
  assert.equal(renamed.name, 'analysis.ipynb');
  await assert.rejects(contents.get(nb.path), /404|not found|No such file/i);

  const cp = await contents.createCheckpoint(renamed.path);
  assert.ok(cp.id);
  notebook.cells[0].source = 'print("changed")';
  await contents.save(renamed.path, { type: 'notebook', format: 'json', content: notebook });
  const list = await contents.listCheckpoints(renamed.path);
  assert.ok(list.some((c) => c.id === cp.id));
  await contents.restoreCheckpoint(renamed.path, cp.id);
  const restored = await contents.get(renamed.path);
  assert.equal(restored.content.cells[0].source, 'print("hi")');
  await contents.deleteCheckpoint(renamed.path, cp.id);
  // Saving a notebook gives it a checkpoint when it has none (as Jupyter does), so only the
  // deleted one must be gone.
  assert.ok(!(await contents.listCheckpoints(renamed.path)).some((c) => c.id === cp.id));

  const copy = await contents.copy(renamed.path, dir.path);
  assert.equal(copy.name, 'analysis-Copy1.ipynb');

  const listing = await contents.get(dir.path);
  assert.deepEqual(listing.content.map((e) => e.name).sort(), ['analysis-Copy1.ipynb', 'analysis.ipynb']);

  await contents.delete(copy.path);
  await contents.delete(renamed.path);
  await contents.delete(dir.path);
  await assert.rejects(contents.get(dir.path), /404|not found|No such file/i);
});
