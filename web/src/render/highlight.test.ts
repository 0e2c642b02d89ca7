import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import { highlightCode } from './index';

installDOM();

test('Python is highlighted with tok- classes, text intact', () => {
  const src = 'def f(x):\n    # a comment\n    return "s" + 42 <b>\n';
  const pre = highlightCode(src, 'python');
  assert.equal(pre.tagName, 'PRE');
  assert.ok(pre.classList.contains('nb-code'));
  const code = pre.querySelector('code')!;
  assert.equal(code.textContent, src);
  const cls = (t: string) => [...code.querySelectorAll('span')].find((s) => s.textContent === t)?.className ?? '';
  assert.match(cls('def'), /tok-keyword/);
  assert.match(cls('return'), /tok-keyword/);
  assert.match(cls('# a comment'), /tok-comment/);
  assert.match(cls('"s"'), /tok-string/);
  assert.match(cls('42'), /tok-number/);
  assert.match(cls('f'), /tok-definition/);
  assert.equal(code.querySelector('b'), null);
});

test('ipython3 counts as Python; other languages are plain text', () => {
  assert.ok(highlightCode('import os', 'ipython3').querySelector('span.tok-keyword'));
  const r = highlightCode('x <- c(1, 2) # R', 'R');
  assert.equal(r.querySelector('span'), null);
  assert.equal(r.textContent, 'x <- c(1, 2) # R');
});
