import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import { renderMarkdown } from './index';
import { removeMath } from './math';

installDOM();

const opts = { trusted: false };

function tex(el: Element): string[] {
  return [...el.querySelectorAll('annotation')].map((a) => a.textContent ?? '');
}

test('markdown renders, sanitised', () => {
  const el = renderMarkdown(
    '# Head\n\nSome **bold** <img src=x onerror="x()"> <script>x()</script>\n\n[l](https://example.com)',
    opts,
  );
  assert.ok(el.classList.contains('nb-markdown'));
  assert.equal(el.querySelector('h1')?.textContent, 'Head');
  assert.equal(el.querySelector('strong')?.textContent, 'bold');
  assert.equal(el.querySelector('script'), null);
  assert.equal(el.innerHTML.includes('onerror'), false);
  assert.equal(el.querySelector('a')?.getAttribute('target'), '_blank');
});

test('inline and display math in all four notations become KaTeX', () => {
  const el = renderMarkdown('Inline $x_1*y_2$ and \\(a_b\\).\n\n$$\\sum_{i=1}^n i_*$$\n\n\\[E=mc^2\\]', opts);
  assert.deepEqual(tex(el), ['x_1*y_2', 'a_b', '\\sum_{i=1}^n i_*', 'E=mc^2']);
  assert.equal(el.querySelectorAll('.katex-display').length, 2);
  assert.equal(el.querySelectorAll('.katex').length, 4);
  // Markdown did not see the math: no emphasis made of its _ and *.
  assert.equal(el.querySelector('em'), null);
});

test('math environments are display math', () => {
  const el = renderMarkdown('\\begin{align}a &= b \\\\ c &= d\\end{align}', opts);
  assert.equal(el.querySelectorAll('.katex-display').length, 1);
});

test('a $ inside code spans and fenced code stays a dollar', () => {
  const el = renderMarkdown('Cost `$x$` and ``a $b` $c``\n\n```sh\necho $HOME $PATH\n```\n\nbut $y$ is math', opts);
  const codes = [...el.querySelectorAll('code')].map((c) => c.textContent);
  assert.deepEqual(codes, ['$x$', 'a $b` $c', 'echo $HOME $PATH\n']);
  assert.deepEqual(tex(el), ['y']);
});

test('an unclosed backtick does not hide the math of later paragraphs', () => {
  const el = renderMarkdown('a lone ` here\n\nthen $z$ and `$x$`', opts);
  assert.deepEqual(tex(el), ['z']);
  assert.equal(el.querySelector('code')?.textContent, '$x$');
});

test('an escaped \\$ is a dollar, and a lone $ is text', () => {
  const el = renderMarkdown('Price \\$5 and \\$6; one $ alone.', opts);
  assert.equal(el.textContent?.trim(), 'Price $5 and $6; one $ alone.');
  assert.equal(el.querySelector('.katex'), null);
});

test('bad TeX is shown as an error in place, not thrown', () => {
  const el = renderMarkdown('before $\\frac{1}{$ after', opts);
  assert.ok(el.querySelector('.katex-error'), el.innerHTML);
  assert.match(el.textContent ?? '', /before .* after/);
});

test('removeMath leaves placeholders and the math', () => {
  const { text, math } = removeMath('a $b$ c $$d$$');
  assert.equal(text, 'a \uE0000\uE001 c \uE0001\uE001');
  assert.deepEqual(math, [
    { tex: 'b', display: false },
    { tex: 'd', display: true },
  ]);
});

test('attached images are shown from the cell attachments; unknown ones lose their source', () => {
  const el = renderMarkdown('![a](attachment:pic%201.png) ![b](attachment:none.png)', {
    trusted: false,
    attachments: { 'pic 1.png': { 'image/png': 'iVBO\nRw0KGgo=' } },
  });
  const imgs = el.querySelectorAll('img');
  assert.equal(imgs[0].getAttribute('src'), 'data:image/png;base64,iVBORw0KGgo=');
  assert.equal(imgs[1].hasAttribute('src'), false);
});
