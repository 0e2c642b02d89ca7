import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import { Toolbar, UploadProgress, kernelOptions } from './actions';

installDOM();

const specs = {
  default: 'python3',
  kernelspecs: {
    ir: { name: 'ir', display_name: 'R', language: 'R', argv: [], resources: {} },
    python3: { name: 'python3', display_name: 'Python 3 (ipykernel)', language: 'python', argv: [], resources: {} },
  },
};

test('kernelOptions: by display name, the default selected', () => {
  assert.deepEqual(kernelOptions(specs), [
    { name: 'python3', label: 'Python 3 (ipykernel)', selected: true },
    { name: 'ir', label: 'R', selected: false },
  ]);
  assert.deepEqual(kernelOptions(null), []);
});

test('the toolbar: a GET form to /new with dir and a labelled Kernel select, New folder, Upload', () => {
  const calls: string[] = [];
  const bar = new Toolbar('/base/new', 'a b/c', {
    newFolder: () => calls.push('folder'),
    newFile: (ext) => calls.push(`file ${ext}`),
    upload: (fs) => calls.push(`upload ${fs.length}`),
  });
  document.body.replaceChildren(bar.element);
  const form = bar.element.querySelector('form')!;
  assert.equal(form.getAttribute('method'), 'get');
  assert.equal(form.getAttribute('action'), '/base/new');
  const select = form.querySelector('select')!;
  assert.equal(select.labels[0].textContent, 'Kernel');
  const submit = form.querySelector<HTMLButtonElement>('button[type=submit]')!;
  assert.equal(submit.disabled, true, 'no notebook before the specs are known');
  bar.setKernelSpecs(specs);
  assert.equal(submit.disabled, false);
  assert.equal(select.value, 'python3');
  const data = new window.FormData(form);
  assert.deepEqual(
    [...data.entries()],
    [
      ['dir', 'a b/c'],
      ['kernel', 'python3'],
    ],
  );
  // A later refresh of the specs keeps what the user chose.
  select.value = 'ir';
  bar.setKernelSpecs(specs);
  assert.equal(select.value, 'ir');
  bar.setKernelSpecs({ default: '', kernelspecs: {} });
  assert.equal(submit.disabled, true);
  bar.element.querySelector<HTMLButtonElement>('button[data-action=new-folder]')!.click();
  assert.deepEqual(calls, ['folder']);
  const input = bar.element.querySelector<HTMLInputElement>('.nb-upload input[type=file]')!;
  assert.equal(input.labels![0].textContent, 'Upload');
});

test('New file: a menu of text, Markdown and Python files that opens and closes as a disclosure', () => {
  const calls: string[] = [];
  const bar = new Toolbar('/new', '', {
    newFolder: () => calls.push('folder'),
    newFile: (ext) => calls.push(ext),
    upload: () => calls.push('upload'),
  });
  document.body.replaceChildren(bar.element);
  const button = bar.element.querySelector<HTMLButtonElement>('button[data-action=new-file]')!;
  const menu = document.getElementById(button.getAttribute('aria-controls')!)!;
  assert.equal(button.textContent, 'New file');
  assert.equal(menu.getAttribute('aria-label'), 'New file');
  assert.equal(menu.hidden, true);
  assert.equal(button.getAttribute('aria-expanded'), 'false');
  button.click();
  assert.equal(menu.hidden, false);
  assert.equal(button.getAttribute('aria-expanded'), 'true');
  const items = [...menu.querySelectorAll('button')];
  assert.deepEqual(
    items.map((b) => b.textContent),
    ['Text file', 'Markdown file', 'Python file'],
  );
  assert.equal(document.activeElement, items[0], 'the first kind has the focus');
  // Escape closes it and gives the focus back to the button.
  items[0].dispatchEvent(new window.KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
  assert.equal(menu.hidden, true);
  assert.equal(document.activeElement, button);
  button.click();
  items[2].click();
  assert.equal(menu.hidden, true);
  assert.deepEqual(calls, ['.py']);
});

test('UploadProgress shows bytes sent, then the outcome', () => {
  const p = new UploadProgress('big.bin', 3 * 1024 * 1024);
  const bar = p.element.querySelector('progress')!;
  assert.equal(bar.getAttribute('aria-label'), 'Uploading big.bin');
  p.progress(1024 * 1024);
  assert.equal(bar.value, 1024 * 1024);
  assert.match(p.element.textContent, /1\.0 MiB of 3\.0 MiB/);
  p.done();
  assert.equal(p.element.dataset.state, 'done');
  p.failed('Forbidden');
  assert.match(p.element.textContent, /Failed: Forbidden/);
});
