import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import { appendStream, renderOutput } from './index';

installDOM();

function stream(text: string, name = 'stdout'): HTMLElement {
  return renderOutput({ output_type: 'stream', name, text }, { trusted: false });
}

test('a stream is a <pre> with its name as a class', () => {
  const el = stream('hi\n', 'stderr');
  assert.equal(el.tagName, 'PRE');
  assert.ok(el.classList.contains('nb-stderr'));
  assert.ok(el.classList.contains('nb-output'));
  assert.equal(el.textContent, 'hi\n');
});

test('appended chunks are added as text, never markup', () => {
  const el = stream('a <b>');
  appendStream(el, ' & </pre><script>x()</script>\n');
  assert.equal(el.textContent, 'a <b> & </pre><script>x()</script>\n');
  assert.equal(el.querySelector('b, script'), null);
});

test('\\r overwrites the line as a terminal does, across chunks', () => {
  const el = stream('');
  appendStream(el, 'start\n');
  appendStream(el, ' 10%');
  appendStream(el, '\r 50%');
  assert.equal(el.textContent, 'start\n 50%');
  // A \r at the end of one chunk, the text at the start of the next.
  appendStream(el, '\r');
  appendStream(el, '100%\n');
  assert.equal(el.textContent, 'start\n100%\n');
  // A shorter text overwrites only as many characters.
  appendStream(el, 'hello world\rHELLO');
  assert.equal(el.textContent, 'start\n100%\nHELLO world');
  appendStream(el, '\n');
  assert.equal(el.textContent, 'start\n100%\nHELLO world\n');
});

test('\\r\\n is a newline, even split between chunks', () => {
  const el = stream('one\r\ntwo\r');
  appendStream(el, '\nthree');
  assert.equal(el.textContent, 'one\ntwo\nthree');
});

test('a progress bar redrawn in many chunks leaves only its last state', () => {
  const el = stream('');
  for (let i = 0; i <= 100; i++) {
    appendStream(el, `\r${String(i).padStart(3)}% |${'#'.repeat(i / 10)}${' '.repeat(10 - i / 10)}|`);
  }
  appendStream(el, '\ndone\n');
  assert.equal(el.textContent, '100% |##########|\ndone\n');
});

test('ANSI colours become classes, the text escaped, and colours carry over chunks', () => {
  const el = stream('\x1b[31mred <b>');
  appendStream(el, ' still red\x1b[0m plain \x1b[1;32mbold green\x1b[0m\n');
  assert.equal(el.textContent, 'red <b> still red plain bold green\n');
  const reds = [...el.querySelectorAll('span.ansi-red-fg')].map((s) => s.textContent);
  assert.deepEqual(reds, ['red <b>', ' still red']);
  const green = el.querySelector('span.ansi-green-fg') as HTMLElement;
  assert.equal(green.textContent, 'bold green');
  assert.match(green.getAttribute('style') ?? '', /bold/);
  assert.equal(el.querySelector('b'), null);
});

test('an escape split between chunks still takes effect', () => {
  const el = stream('a\x1b[3');
  appendStream(el, '4mblue\x1b[0m\n');
  assert.equal(el.textContent, 'ablue\n');
  assert.equal(el.querySelector('span.ansi-blue-fg')?.textContent, 'blue');
});

test('\\r overwrites coloured text, keeping the colours of what is left', () => {
  const el = stream('\x1b[31mRRRRRR\x1b[0m');
  appendStream(el, '\r\x1b[32mGG\x1b[0m');
  assert.equal(el.textContent, 'GGRRRR');
  assert.equal(el.querySelector('.ansi-green-fg')?.textContent, 'GG');
  assert.equal(el.querySelector('.ansi-red-fg')?.textContent, 'RRRR');
});

test('10,000 lines in 1,000 chunks: each chunk appends, nothing earlier is redone', () => {
  const el = stream('');
  appendStream(el, 'first \x1b[31mline\x1b[0m\n');
  const first = el.firstChild;
  const firstSpan = el.querySelector('.ansi-red-fg');
  const t0 = performance.now();
  let n = 0;
  for (let c = 0; c < 1000; c++) {
    let chunk = '';
    for (let k = 0; k < 10; k++) {
      chunk += `line ${n++} \x1b[32mok\x1b[0m\n`;
    }
    appendStream(el, chunk);
  }
  const ms = performance.now() - t0;
  const text = el.textContent ?? '';
  assert.equal(text.split('\n').length, 10002);
  assert.ok(text.startsWith('first line\nline 0 ok\nline 1 ok\n'));
  assert.ok(text.endsWith('line 9998 ok\nline 9999 ok\n'));
  // The nodes of earlier output are the same nodes: later chunks never re-render them.
  assert.equal(el.firstChild, first);
  assert.equal(el.querySelector('.ansi-red-fg'), firstSpan);
  // Only the open line is kept apart; finished lines are not one element each.
  assert.ok(el.childNodes.length <= 1002, `${el.childNodes.length} children`);
  // A gross bound (jsdom is far slower than a browser): quadratic work would take minutes.
  assert.ok(ms < 20000, `took ${ms.toFixed(0)} ms`);
});

test('text/plain outputs are ANSI-aware too', () => {
  const el = renderOutput(
    {
      output_type: 'execute_result',
      execution_count: 1,
      data: { 'text/plain': '\x1b[35mmagenta\x1b[0m <x>' },
      metadata: {},
    },
    { trusted: false },
  );
  assert.equal(el.textContent, 'magenta <x>');
  assert.equal(el.querySelector('.ansi-magenta-fg')?.textContent, 'magenta');
});

test('a backspace steps back one character, as a terminal does', () => {
  const el = stream('working |');
  for (const c of ['/', '-', '\\']) {
    appendStream(el, `\b${c}`);
  }
  assert.equal(el.textContent, 'working \\');
  appendStream(el, '\b\b\bX\n');
  assert.equal(el.textContent, 'workinX \\\n');
});
