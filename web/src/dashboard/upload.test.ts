import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Contents } from '@jupyterlab/services';
import { bytesToBase64, planChunks, uploadFile, CHUNK_SIZE } from './upload';

test('planChunks: a small file goes in one piece, without a chunk number', () => {
  assert.deepEqual(planChunks(0), [{ start: 0, end: 0 }]);
  assert.deepEqual(planChunks(CHUNK_SIZE), [{ start: 0, end: CHUNK_SIZE }]);
});

test('planChunks: a large file goes in 1 MiB chunks numbered 1, 2, ..., -1', () => {
  const plan = planChunks(2 * CHUNK_SIZE + 5);
  assert.deepEqual(plan, [
    { start: 0, end: CHUNK_SIZE, chunk: 1 },
    { start: CHUNK_SIZE, end: 2 * CHUNK_SIZE, chunk: 2 },
    { start: 2 * CHUNK_SIZE, end: 2 * CHUNK_SIZE + 5, chunk: -1 },
  ]);
  assert.deepEqual(
    planChunks(CHUNK_SIZE + 1).map((p) => p.chunk),
    [1, -1],
  );
});

test('bytesToBase64 matches Node for every byte value and large inputs', () => {
  const all = new Uint8Array(256 * 300);
  for (let i = 0; i < all.length; i++) all[i] = (i * 7919) & 0xff;
  assert.equal(bytesToBase64(all), Buffer.from(all).toString('base64'));
  assert.equal(bytesToBase64(new Uint8Array()), '');
});

test('uploadFile sends the chunks in order and they add up to the file', async () => {
  const bytes = new Uint8Array(2500);
  for (let i = 0; i < bytes.length; i++) bytes[i] = i & 0xff;
  const file = Object.assign(new Blob([bytes]), { name: 'data.bin' });
  const sent: { path: string; body: Partial<Contents.IModel> }[] = [];
  const progress: number[] = [];
  await uploadFile(
    {
      save(path, body) {
        sent.push({ path, body });
        return Promise.resolve({ path } as Contents.IModel);
      },
    },
    file,
    'sub/dir',
    (n) => progress.push(n),
    1000,
  );
  assert.deepEqual(
    sent.map((s) => s.path),
    ['sub/dir/data.bin', 'sub/dir/data.bin', 'sub/dir/data.bin'],
  );
  assert.deepEqual(
    sent.map((s) => s.body.chunk),
    [1, 2, -1],
  );
  assert.ok(sent.every((s) => s.body.type === 'file' && s.body.format === 'base64' && s.body.name === 'data.bin'));
  const joined = Buffer.concat(sent.map((s) => Buffer.from(s.body.content as string, 'base64')));
  assert.deepEqual(new Uint8Array(joined), bytes);
  assert.deepEqual(progress, [1000, 2000, 2500]);
});
