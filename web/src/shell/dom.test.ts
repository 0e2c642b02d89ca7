import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import { h } from './dom';

installDOM();

test('h makes text of strings, never markup', () => {
  const el = h('p', { class: 'x', hidden: false }, '<b>bold</b>');
  assert.equal(el.outerHTML, '<p class="x">&lt;b&gt;bold&lt;/b&gt;</p>');
});

test('h refuses inline event handlers', () => {
  assert.throws(() => h('button', { onclick: 'alert(1)' }), /addEventListener/);
});
