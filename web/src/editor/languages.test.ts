import { test } from 'node:test';
import assert from 'node:assert/strict';
import { indentOf, languageOf, loadLanguage, type Language } from './languages';

test('languageOf: by whole name (Makefile, Dockerfile), else by extension, else plain', () => {
  const cases: [string, Language][] = [
    ['a/b/run.py', 'python'],
    ['README.md', 'markdown'],
    ['analysis.R', 'r'],
    ['x.jl', 'julia'],
    ['deploy.sh', 'shell'],
    ['Makefile', 'makefile'],
    ['sub/makefile', 'makefile'],
    ['rules.mk', 'makefile'],
    ['Makefile.am', 'makefile'],
    ['Dockerfile', 'dockerfile'],
    ['Dockerfile.dev', 'dockerfile'],
    ['app.dockerfile', 'dockerfile'],
    ['config.yaml', 'yaml'],
    ['.github/ci.yml', 'yaml'],
    ['pyproject.toml', 'toml'],
    ['data.json', 'json'],
    ['query.sql', 'sql'],
    ['setup.cfg', 'properties'],
    ['tox.ini', 'properties'],
    ['main.js', 'javascript'],
    ['main.ts', 'typescript'],
    ['page.html', 'html'],
    ['style.css', 'css'],
    ['notes.txt', 'plain'],
    ['data.csv', 'plain'],
    ['data.tsv', 'plain'],
    ['LICENSE', 'plain'],
    ['.bashrc', 'shell'],
    // A name that is a method of objects is no language.
    ['x.constructor', 'plain'],
    ['constructor', 'plain'],
  ];
  for (const [name, want] of cases) {
    assert.equal(languageOf(name), want, name);
  }
});

test('indentOf: a Makefile indents with tabs', () => {
  assert.equal(indentOf('makefile'), '\t');
  assert.equal(indentOf('python'), '    ');
  assert.equal(indentOf('yaml'), '  ');
});

test('loadLanguage loads a parser for every language but plain', async () => {
  for (const lang of [
    'python',
    'markdown',
    'yaml',
    'toml',
    'json',
    'sql',
    'shell',
    'r',
    'dockerfile',
    'properties',
  ] as const) {
    const ext = await loadLanguage(lang);
    assert.ok(!Array.isArray(ext) || ext.length > 0, lang);
  }
  assert.deepEqual(await loadLanguage('plain'), []);
});
