import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as nbformat from '@jupyterlab/nbformat';
import { installDOM } from '../testing/dom';
import { needsFrame } from './frame';
import { renderOutput } from './index';

installDOM();

function display(data: Record<string, unknown>): nbformat.IOutput {
  return { output_type: 'display_data', data, metadata: {} } as nbformat.IOutput;
}

const pandasTable =
  '<div>\n<style scoped>\n    .dataframe tbody tr th:only-of-type {\n        vertical-align: middle;\n    }\n</style>\n' +
  '<table border="1" class="dataframe">\n  <thead>\n    <tr style="text-align: right;">\n      <th></th>\n      <th>a</th>\n' +
  '    </tr>\n  </thead>\n  <tbody>\n    <tr>\n      <th>0</th>\n      <td>1</td>\n    </tr>\n  </tbody>\n</table>\n</div>';

test('HTML with a script, JavaScript and Plotly figures run in a frame; the rest in the page', () => {
  const cases: [string, string, boolean][] = [
    ['text/html', '<div id=x></div><script>x.textContent = 1</script>', true],
    ['text/html', '<div></div><SCRIPT type="text/javascript">go()</SCRIPT>', true],
    ['text/html', '<script src="https://cdn.example/lib.js"></script>', true],
    ['text/html', '<script/src="x.js"></script>', true],
    ['text/html', pandasTable, false],
    ['text/html', '<b onclick="alert(1)">no script element</b>', false],
    ['text/html', '<p>a <code>&lt;script&gt;</code> written as text</p>', false],
    ['text/html', '<scripted-element></scripted-element>', false],
    ['application/javascript', 'element.textContent = 1', true],
    ['application/vnd.plotly.v1+json', '', true],
    ['image/svg+xml', '<svg><script>alert(1)</script></svg>', false],
    ['text/markdown', '<script>alert(1)</script>', false],
    ['text/plain', '<script>', false],
  ];
  for (const [mime, value, want] of cases) {
    assert.equal(needsFrame(mime, value), want, `${mime} ${value}`);
  }
});

test('a framed output is a sandboxed frame of /output-frame, without the same origin', () => {
  for (const data of [
    { 'text/html': '<div id=x></div><script>x.textContent = 1</script>', 'text/plain': '<IPython.core.display.HTML>' },
    { 'application/javascript': 'element.textContent = 1', 'text/plain': '<IPython.core.display.Javascript>' },
    { 'application/vnd.plotly.v1+json': { data: [{ type: 'bar', y: [1, 2, 3] }] }, 'text/html': '<div></div>' },
  ]) {
    const el = renderOutput(display(data), { trusted: true });
    const frame = el.querySelector('iframe');
    assert.ok(frame, JSON.stringify(data));
    assert.equal(frame.getAttribute('sandbox'), 'allow-scripts');
    assert.equal(frame.getAttribute('src'), '/output-frame');
    assert.ok(frame.title !== '');
    assert.equal(el.querySelector('script'), null);
    assert.ok(!el.textContent?.includes('IPython'));
  }
});

test('a pandas table stays in the page, sanitised, with its style in a trusted notebook', () => {
  const el = renderOutput(display({ 'text/html': pandasTable, 'text/plain': '   a\n0  1' }), { trusted: true });
  assert.equal(el.querySelector('iframe'), null);
  assert.equal(el.querySelectorAll('table.dataframe td').length, 1);
  assert.ok(el.querySelector('.nb-html style'));
});

test('a widget says what it is and why it is not shown, with its text beside', () => {
  const el = renderOutput(
    display({
      'application/vnd.jupyter.widget-view+json': { model_id: 'abc', version_major: 2, version_minor: 0 },
      'text/plain': 'IntSlider(value=3)',
    }),
    { trusted: true },
  );
  assert.equal(el.dataset.mimeType, 'application/vnd.jupyter.widget-view+json');
  assert.match(el.textContent ?? '', /interactive widget \(ipywidgets\); nbkube’s page does not run widgets yet/);
  assert.match(el.textContent ?? '', /IntSlider\(value=3\)/);
  assert.ok(!el.textContent?.includes('application/vnd'));
});

test('a bundle of types nothing shows names them in a sentence', () => {
  const one = renderOutput(display({ 'application/x-custom': 'x' }), { trusted: true });
  assert.equal(one.textContent, 'This output is of type application/x-custom, which nbkube’s page cannot show.');
  const two = renderOutput(display({ 'application/x-a': 'x', 'application/x-b': 'y' }), { trusted: true });
  assert.equal(
    two.textContent,
    'This output is of types application/x-a, application/x-b, none of which nbkube’s page can show.',
  );
  assert.equal(renderOutput(display({}), { trusted: true }).textContent, '');
});
