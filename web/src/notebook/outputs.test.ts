import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as nbformat from '@jupyterlab/nbformat';
import { installDOM } from '../testing/dom';
import { DisplayRegistry, OutputArea, outputFromMessage } from './outputs';

installDOM();

/** A scheduler the test runs by hand: the frames. */
function frames() {
  const q: (() => void)[] = [];
  return {
    schedule: (f: () => void) => q.push(f),
    run: () => q.splice(0).forEach((f) => f()),
    get pending() {
      return q.length;
    },
  };
}

const stream = (text: string, name = 'stdout') => ({ output_type: 'stream', name, text }) as nbformat.IStream;
const display = (text: string) =>
  ({ output_type: 'display_data', data: { 'text/plain': text }, metadata: {} }) as nbformat.IDisplayData;

test('stream text is merged in the model at once and drawn once per frame', () => {
  const f = frames();
  const outputs: nbformat.IOutput[] = [];
  let changes = 0;
  const a = new OutputArea(outputs, {
    registry: new DisplayRegistry(),
    schedule: f.schedule,
    onChange: () => changes++,
  });
  for (let i = 0; i < 10000; i++) {
    a.add(stream(`line ${i}\n`));
  }
  assert.equal(outputs.length, 1, 'one stream output');
  assert.equal((outputs[0] as nbformat.IStream).text, Array.from({ length: 10000 }, (_, i) => `line ${i}\n`).join(''));
  assert.equal(f.pending, 1, 'one frame scheduled for all the text');
  assert.equal(a.node.textContent, '');
  f.run();
  assert.ok(a.node.textContent.includes('line 9999'));
  assert.equal(a.node.querySelectorAll('.nb-stream').length, 1);
  assert.ok(changes > 0);
});

test('stdout and stderr make separate outputs; another output in between starts a new stream', () => {
  const f = frames();
  const outputs: nbformat.IOutput[] = [];
  const a = new OutputArea(outputs, { registry: new DisplayRegistry(), schedule: f.schedule });
  a.add(stream('a'));
  a.add(stream('b', 'stderr'));
  a.add(stream('c', 'stderr'));
  a.add(display('d'));
  a.add(stream('e', 'stderr'));
  f.run();
  assert.deepEqual(
    outputs.map((o) => o.output_type + ':' + [(o as nbformat.IStream).text ?? ''].flat().join('')),
    ['stream:a', 'stream:bc', 'display_data:', 'stream:e'],
  );
  assert.equal(a.node.children.length, 4);
});

test('clear_output(wait) clears on the next output, not before', () => {
  const f = frames();
  const outputs: nbformat.IOutput[] = [];
  const a = new OutputArea(outputs, { registry: new DisplayRegistry(), schedule: f.schedule });
  a.add(display('first'));
  a.clear(true);
  assert.equal(outputs.length, 1, 'still shown while waiting');
  assert.ok(a.node.textContent.includes('first'));
  a.add(display('second'));
  assert.equal(outputs.length, 1);
  assert.ok(!a.node.textContent.includes('first'));
  assert.ok(a.node.textContent.includes('second'));
  a.clear(false);
  assert.equal(outputs.length, 0);
  assert.equal(a.node.hidden, true);
});

test('clear_output(wait) then stream: the pending stream text of the old output is not drawn', () => {
  const f = frames();
  const outputs: nbformat.IOutput[] = [];
  const a = new OutputArea(outputs, { registry: new DisplayRegistry(), schedule: f.schedule });
  a.add(stream('old\n'));
  a.clear(true);
  a.add(stream('new\n'));
  f.run();
  assert.equal(a.node.textContent, 'new\n');
  assert.equal((outputs[0] as nbformat.IStream).text, 'new\n');
});

test('update_display_data redraws every output with the display id, in any cell', () => {
  const reg = new DisplayRegistry();
  const o1: nbformat.IOutput[] = [];
  const o2: nbformat.IOutput[] = [];
  const a = new OutputArea(o1, { registry: reg });
  const b = new OutputArea(o2, { registry: reg });
  a.add(display('v1'), 'dpy');
  b.add(display('other'));
  b.add(display('v1 again'), 'dpy');
  assert.ok(a.node.textContent.includes('v1 again'), 'a display with the same id updates the earlier one');
  assert.equal(reg.update('dpy', { 'text/plain': 'v2' }, {}), 2);
  assert.equal(a.node.textContent, 'v2');
  assert.equal(b.node.textContent, 'otherv2');
  assert.deepEqual((o1[0] as nbformat.IDisplayData).data, { 'text/plain': 'v2' });
  a.clear();
  assert.equal(reg.update('dpy', { 'text/plain': 'v3' }, {}), 1, 'cleared outputs are no longer updated');
  assert.equal(reg.update('nope', {}, {}), 0);
});

test('outputs loaded from the file are drawn', () => {
  const outputs: nbformat.IOutput[] = [stream('hello\n'), display('42')];
  const a = new OutputArea(outputs, { registry: new DisplayRegistry() });
  assert.equal(a.node.hidden, false);
  assert.equal(a.node.children.length, 2);
  assert.ok(a.node.classList.contains('nb-outputs'));
});

test('outputFromMessage keeps what nbformat saves and the display id apart', () => {
  const r = outputFromMessage({
    msgType: 'display_data',
    content: { data: { 'text/plain': 'x' }, metadata: {}, transient: { display_id: 'abc' } },
  });
  assert.equal(r?.displayId, 'abc');
  assert.deepEqual(r?.output, { output_type: 'display_data', data: { 'text/plain': 'x' }, metadata: {} });
  const e = outputFromMessage({ msgType: 'execute_result', content: { data: {}, metadata: {}, execution_count: 3 } });
  assert.equal((e?.output as nbformat.IExecuteResult).execution_count, 3);
  assert.equal(outputFromMessage({ msgType: 'status', content: {} }), null);
  const err = outputFromMessage({ msgType: 'error', content: { ename: 'E', evalue: 'v', traceback: ['t'] } });
  assert.deepEqual(err?.output, { output_type: 'error', ename: 'E', evalue: 'v', traceback: ['t'] });
});

test('an input request shows a field (password hidden) and echoes the answer', async () => {
  const f = frames();
  const outputs: nbformat.IOutput[] = [];
  const a = new OutputArea(outputs, { registry: new DisplayRegistry(), schedule: f.schedule });
  document.body.append(a.node);
  const p = a.requestInput('Password: ', true);
  const input = a.node.querySelector('input') as HTMLInputElement;
  assert.equal(input.type, 'password');
  input.value = 'secret';
  input.dispatchEvent(new window.KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
  assert.equal(await p, 'secret');
  f.run();
  assert.equal(a.node.querySelector('input'), null);
  assert.equal(a.node.textContent, 'Password: \n', 'the password is not echoed');
  a.node.remove();
});
