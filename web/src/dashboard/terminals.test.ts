import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import type { TerminalModel } from '../shell/terminals';
import { DateFormatter } from './format';
import { newTerminalButton, openNewTerminal, RunningTerminals } from './terminals';

installDOM();

const dates = new DateFormatter('en-GB', 'UTC');

test('the running terminals: a link to each page, last activity, Shut down; rows kept by name', () => {
  const calls: string[] = [];
  const view = new RunningTerminals((n) => '/terminals/' + n, { shutdown: (n) => calls.push(n) }, dates);
  document.body.replaceChildren(view.element);
  assert.equal(view.element.hidden, true, 'hidden until the server says it has terminals');
  view.update([]);
  assert.equal(view.element.hidden, false);
  assert.match(view.element.tBodies[0].textContent, /No terminals are running/);
  assert.equal(view.element.caption!.textContent, 'Running terminals');

  view.update([
    { name: '10', last_activity: '2025-03-04T05:06:07.000000Z' },
    { name: '2', last_activity: '2025-03-04T05:00:00Z' },
    { name: '1' },
  ]);
  const rows = () => Array.from(view.element.querySelectorAll<HTMLTableRowElement>('tr[data-terminal]'));
  assert.deepEqual(
    rows().map((r) => r.dataset.terminal),
    ['1', '2', '10'],
  );
  const two = rows()[1];
  const link = two.querySelector('a')!;
  assert.equal(link.textContent, 'Terminal 2');
  assert.equal(link.getAttribute('href'), '/terminals/2');
  assert.equal(link.getAttribute('target'), '_blank');
  assert.equal(two.cells[1].textContent, dates.format('2025-03-04T05:00:00Z'));
  assert.equal(rows()[0].cells[1].textContent, '', 'no activity known');
  const shut = two.querySelector('button')!;
  assert.equal(shut.getAttribute('aria-label'), 'Shut down terminal 2');
  shut.click();
  assert.deepEqual(calls, ['2']);

  view.update([{ name: '2', last_activity: '2025-03-04T06:00:00Z' }]);
  assert.equal(view.element.querySelector('tr[data-terminal="2"]'), two, 'the same row, updated');
  assert.equal(two.cells[1].textContent, dates.format('2025-03-04T06:00:00Z'));
  assert.equal(rows().length, 1);
  view.update([]);
  assert.match(view.element.tBodies[0].textContent, /No terminals are running/);
  // A server without terminals: no table at all.
  view.update(undefined);
  assert.equal(view.element.hidden, true);
});

test('New terminal is hidden until terminals are known to be there', () => {
  let clicked = 0;
  const b = newTerminalButton(() => clicked++);
  assert.equal(b.hidden, true);
  assert.equal(b.textContent, 'New terminal');
  b.click();
  assert.equal(clicked, 1);
});

/** fakeWindow is the tab window.open gives, as far as openNewTerminal uses it. */
function fakeWindow() {
  return {
    opener: {} as unknown,
    document: { title: '', body: { textContent: '' } },
    location: { href: 'about:blank' },
    closed: false,
    close() {
      this.closed = true;
    },
  };
}

test('New terminal opens the tab at once, then sends it to the new terminal’s page', async () => {
  const w = fakeWindow();
  const opened: string[] = [];
  let answer!: (t: TerminalModel) => void;
  const started = new Promise<TerminalModel>((r) => (answer = r));
  const done = openNewTerminal(
    () => started,
    (n) => '/u/ann/terminals/' + n,
    (url, target) => {
      opened.push(`${url} ${target}`);
      return w as unknown as WindowProxy;
    },
    () => assert.fail('not in this tab'),
  );
  // Opened in the click, before the server answered: a window opened later is a popup.
  assert.deepEqual(opened, [' _blank']);
  assert.equal(w.opener, null, 'the terminal page cannot reach the dashboard');
  assert.equal(w.document.body.textContent, 'Starting a terminal…');
  answer({ name: '4', last_activity: '2025-01-01T00:00:00Z' });
  assert.equal((await done).name, '4');
  assert.equal(w.location.href, '/u/ann/terminals/4');
  assert.equal(w.closed, false);
});

test('a terminal that fails to start closes its tab and says why; without a tab the page opens here', async () => {
  const w = fakeWindow();
  await assert.rejects(
    openNewTerminal(
      () => Promise.reject(new Error('You may run at most 2 terminals')),
      (n) => '/terminals/' + n,
      () => w as unknown as WindowProxy,
    ),
    /at most 2 terminals/,
  );
  assert.equal(w.closed, true);

  const here: string[] = [];
  await openNewTerminal(
    () => Promise.resolve({ name: '5' }),
    (n) => '/terminals/' + n,
    () => null,
    (url) => here.push(url),
  );
  assert.deepEqual(here, ['/terminals/5']);
});
