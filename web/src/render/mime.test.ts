import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as nbformat from '@jupyterlab/nbformat';
import { installDOM } from '../testing/dom';
import { MIME_PRIORITY, renderOutput } from './index';

installDOM();

const opts = { trusted: false };

function display(data: Record<string, unknown>, metadata: Record<string, unknown> = {}): nbformat.IOutput {
  return { output_type: 'display_data', data, metadata } as nbformat.IOutput;
}

test('MIME_PRIORITY is Jupyter order', () => {
  assert.deepEqual(MIME_PRIORITY, [
    'application/vnd.jupyter.widget-view+json',
    'application/vnd.plotly.v1+json',
    'application/javascript',
    'text/html',
    'image/png',
    'image/jpeg',
    'image/svg+xml',
    'text/markdown',
    'text/latex',
    'application/json',
    'text/plain',
  ]);
});

test('the first present type of the bundle is rendered', () => {
  const el = renderOutput(display({ 'text/plain': 'plain', 'text/html': '<b>bold</b>' }), opts);
  assert.equal(el.dataset.mimeType, 'text/html');
  assert.equal(el.querySelector('b')?.textContent, 'bold');
  assert.ok(!el.textContent?.includes('plain'));

  const img = renderOutput(
    display({ 'text/plain': '<Figure>', 'image/png': 'iVBORw0KGgo=', 'text/latex': '$x$' }),
    opts,
  );
  assert.equal(img.dataset.mimeType, 'image/png');

  const txt = renderOutput(
    {
      output_type: 'execute_result',
      execution_count: 1,
      data: { 'text/plain': ['1', '2'] },
      metadata: {},
    },
    opts,
  );
  assert.equal(txt.dataset.mimeType, 'text/plain');
  assert.equal(txt.textContent, '12');
  assert.ok(txt.classList.contains('nb-output'));
  assert.ok(txt.classList.contains('nb-output-scrolled'));
});

test('images are data: URLs without newlines, sized from metadata, described by text/plain', () => {
  const el = renderOutput(
    display(
      { 'image/png': 'iVBO\nRw0K\nGgo=\n', 'text/plain': '<Figure size 640x480 with 1 Axes>' },
      { 'image/png': { width: 320, height: 240 } },
    ),
    opts,
  );
  const img = el.querySelector('img')!;
  assert.equal(img.getAttribute('src'), 'data:image/png;base64,iVBORw0KGgo=');
  assert.equal(img.getAttribute('width'), '320');
  assert.equal(img.getAttribute('height'), '240');
  assert.equal(img.getAttribute('alt'), '<Figure size 640x480 with 1 Axes>');

  const jpeg = renderOutput(display({ 'image/jpeg': '/9j/4AAQ' }), opts).querySelector('img')!;
  assert.equal(jpeg.getAttribute('src'), 'data:image/jpeg;base64,/9j/4AAQ');
  assert.equal(jpeg.hasAttribute('width'), false);
});

test('HTML shown in the page keeps no event handlers or javascript: URLs, trusted or not; links open in a new tab', () => {
  for (const trusted of [false, true]) {
    const el = renderOutput(
      display({
        'text/html':
          '<div>ok<img src=x onerror="window.hacked=1"><a href="https://example.com/">l</a><a href="javascript:alert(1)">j</a></div>',
      }),
      { trusted },
    );
    assert.equal(el.querySelector('script'), null);
    assert.equal(el.innerHTML.includes('onerror'), false);
    assert.equal(el.innerHTML.includes('javascript:'), false);
    const a = el.querySelector('a[href="https://example.com/"]')!;
    assert.equal(a.getAttribute('target'), '_blank');
    assert.match(a.getAttribute('rel') ?? '', /noopener/);
    assert.equal(el.textContent, 'oklj');
  }
});

test('a trusted notebook keeps its HTML styles, an untrusted one does not', () => {
  const html = '<style>.x{color:red}</style><table class="dataframe"><tr><td>1</td></tr></table>';
  assert.ok(renderOutput(display({ 'text/html': html }), { trusted: true }).querySelector('style'));
  const u = renderOutput(display({ 'text/html': html }), { trusted: false });
  assert.equal(u.querySelector('style'), null);
  assert.ok(u.querySelector('table.dataframe td'));
});

test('SVG is sanitised: no script, no onload, the drawing stays', () => {
  const el = renderOutput(
    display({
      'image/svg+xml':
        '<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" onload="window.hacked=1" width="10" height="10"><script>window.hacked=1</script><rect width="5" height="5" onclick="x()"/><foreignObject><img src=x onerror="y()"></foreignObject></svg>',
    }),
    opts,
  );
  assert.ok(el.querySelector('svg rect'));
  assert.equal(el.querySelector('script'), null);
  assert.equal(/onload|onclick|onerror/.test(el.innerHTML), false);
});

test('JSON is pretty-printed text', () => {
  const el = renderOutput(display({ 'application/json': { a: [1, 2], b: '<i>x</i>' } }), opts);
  const pre = el.querySelector('pre.nb-json')!;
  assert.equal(pre.textContent, '{\n  "a": [\n    1,\n    2\n  ],\n  "b": "<i>x</i>"\n}');
  assert.equal(pre.querySelector('i'), null);
});

test('text/latex is rendered by KaTeX in display mode without its $$', () => {
  const el = renderOutput(display({ 'text/latex': '$$\\frac{a}{b}$$', 'text/plain': 'a/b' }), opts);
  assert.equal(el.dataset.mimeType, 'text/latex');
  assert.ok(el.querySelector('.katex-display .katex .mfrac'), el.innerHTML.slice(0, 300));
  assert.equal(el.textContent?.includes('$$'), false);
  assert.equal(el.querySelector('annotation')?.textContent, '\\frac{a}{b}');
});

test('text/markdown outputs are markdown', () => {
  const el = renderOutput(display({ 'text/markdown': '# Title\n\n*em*' }), opts);
  assert.equal(el.querySelector('h1')?.textContent, 'Title');
  assert.equal(el.querySelector('em')?.textContent, 'em');
});

test('errors: coloured traceback, the class nb-error, the name and value as text', () => {
  const el = renderOutput(
    {
      output_type: 'error',
      ename: 'ZeroDivisionError',
      evalue: 'division by zero',
      traceback: ['\x1b[0;31m---------\x1b[0m', '\x1b[0;31mZeroDivisionError\x1b[0m: division by zero <x>'],
    },
    opts,
  );
  assert.ok(el.classList.contains('nb-error'));
  assert.equal(el.textContent, '---------\nZeroDivisionError: division by zero <x>');
  assert.equal(el.querySelector('span.ansi-red-fg')?.textContent, '---------');
  assert.equal(el.dataset.ename, 'ZeroDivisionError');
  assert.equal(el.dataset.evalue, 'division by zero');

  const bare = renderOutput({ output_type: 'error', ename: 'KeyError', evalue: "'k'", traceback: [] }, opts);
  assert.equal(bare.textContent, "KeyError: 'k'");
});
