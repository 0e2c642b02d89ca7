import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as Xterm from '@xterm/xterm';
import { installDOM } from '../testing/dom';
import { endedText, terminalTakesKey, TerminalPage, type Connection } from './view';

installDOM();
document.head.append(
  Object.assign(document.createElement('script'), {
    id: 'nbkube-config',
    type: 'application/json',
    textContent: JSON.stringify({
      baseUrl: '/u/ann/',
      page: 'terminal',
      path: '',
      terminal: '3',
      user: 'ann',
      canLogout: true,
    }),
  }),
);

/** newTerm is a real xterm.js Terminal, not opened in the page (jsdom cannot lay it out): it
 * parses what is written into its buffer, resizes and reports input as in a browser. */
async function newTerm(): Promise<Xterm.Terminal> {
  // jsdom has no canvas; xterm.js asks for one as it loads, to parse colours, and does without.
  (window as unknown as { HTMLCanvasElement: typeof HTMLCanvasElement }).HTMLCanvasElement.prototype.getContext = () =>
    null;
  // Node loads xterm.js's CommonJS build, whose names are on its default export.
  const m = (await import('@xterm/xterm')) as unknown as { default: typeof Xterm };
  return new m.default.Terminal({ rows: 5, cols: 40, allowProposedApi: true });
}

/** screen is the terminal's lines, as shown. */
function screen(term: Xterm.Terminal): string[] {
  const b = term.buffer.active;
  const lines: string[] = [];
  for (let i = 0; i < b.length; i++) {
    lines.push(b.getLine(i)!.translateToString(true));
  }
  while (lines.length && lines.at(-1) === '') lines.pop();
  return lines;
}

const written = (term: Xterm.Terminal) => new Promise<void>((r) => term.write('', r));

class FakeConnection implements Connection {
  readonly calls: string[] = [];
  connected = false;
  send(text: string): boolean {
    this.calls.push('stdin ' + JSON.stringify(text));
    return this.connected;
  }
  resize(rows: number, cols: number): void {
    this.calls.push(`set_size ${rows} ${cols}`);
  }
}

test('frames reach the terminal: stdout is written, setup starts a clean screen for the replay', async () => {
  const term = await newTerm();
  const page = new TerminalPage('3', term);
  page.events.setup();
  page.events.state('connected');
  page.events.output('$ echo $((6*7))\r\n42\r\n$ ');
  await written(term);
  assert.deepEqual(screen(term), ['$ echo $((6*7))', '42', '$ ']);
  // A reconnection: the server sends setup and replays the recent output, which replaces what
  // is shown instead of coming after it.
  page.events.state('reconnecting');
  page.events.setup();
  page.events.output('$ echo $((6*7))\r\n42\r\n$ ');
  await written(term);
  assert.deepEqual(screen(term), ['$ echo $((6*7))', '42', '$ ']);
  assert.equal(document.body.dataset.terminalConnections, '2');
  term.dispose();
});

test('keys go to the connection only while connected; the size goes at once and on every resize', async () => {
  const term = await newTerm();
  const page = new TerminalPage('3', term);
  const conn = new FakeConnection();
  page.attach(conn);
  assert.deepEqual(conn.calls, ['set_size 5 40']);
  term.input('ls\r');
  assert.deepEqual(conn.calls, ['set_size 5 40'], 'keys while connecting go nowhere');
  page.events.state('connected');
  term.input('ls\r');
  term.resize(100, 30);
  assert.deepEqual(conn.calls, ['set_size 5 40', 'stdin "ls\\r"', 'set_size 30 100']);
  page.events.state('reconnecting');
  term.input('x');
  assert.equal(conn.calls.length, 3);
  term.dispose();
});

test('the state is shown in the header; an ended terminal says why and leads back to the dashboard', async () => {
  const term = await newTerm();
  const page = new TerminalPage('3', term);
  document.body.replaceChildren(page.header, page.main);
  assert.equal(document.title, 'Terminal 3 – nbkube');
  assert.equal(page.header.querySelector('h1')!.textContent, 'Terminal 3');
  assert.equal(page.main.getAttribute('aria-label'), 'Terminal 3');
  assert.equal(page.status.getAttribute('role'), 'status');
  assert.equal(page.status.textContent, 'Connecting…');
  assert.equal(page.notice.hidden, true);
  page.events.setup();
  page.events.state('connected');
  assert.equal(page.status.textContent, 'Connected');
  assert.equal(document.body.dataset.ready, 'terminal');
  page.events.state('reconnecting');
  assert.equal(page.status.textContent, 'Reconnecting…');
  assert.equal(document.body.dataset.terminalState, 'reconnecting');
  page.events.state('ended', 'exited');
  assert.equal(page.status.textContent, 'Ended');
  assert.equal(term.options.disableStdin, true);
  assert.equal(page.notice.hidden, false);
  assert.equal(page.notice.getAttribute('role'), 'alert');
  assert.equal(page.notice.querySelector('p')!.textContent, 'Terminal 3 has ended: its shell exited.');
  const back = page.notice.querySelector('a')!;
  assert.equal(back.textContent, 'Back to the dashboard');
  assert.equal(back.getAttribute('href'), '/u/ann/');
  term.dispose();
});

test('endedText: an exited shell, a terminal shut down, one that was never there, a server without terminals', () => {
  assert.equal(endedText('1', 'exited', true), 'Terminal 1 has ended: its shell exited.');
  assert.equal(endedText('1', 'gone', true), 'Terminal 1 has ended: it was shut down.');
  assert.equal(endedText('9', 'gone', false), 'There is no terminal 9: it was shut down, or it never existed.');
  assert.equal(endedText('9', 'off', false), 'This server runs no terminals.');
});

test('terminalTakesKey: Ctrl-V pastes, Ctrl-C copies a selection, the rest is the shell’s', () => {
  const key = (key: string, mods: Partial<Record<'ctrlKey' | 'shiftKey' | 'altKey' | 'metaKey', boolean>> = {}) => ({
    key,
    ctrlKey: false,
    shiftKey: false,
    altKey: false,
    metaKey: false,
    ...mods,
  });
  assert.equal(terminalTakesKey(key('v', { ctrlKey: true }), false), false, 'Ctrl-V: the browser pastes');
  assert.equal(terminalTakesKey(key('V', { ctrlKey: true, shiftKey: true }), false), false, 'Ctrl-Shift-V');
  assert.equal(terminalTakesKey(key('c', { ctrlKey: true }), true), false, 'Ctrl-C with a selection copies');
  assert.equal(terminalTakesKey(key('C', { ctrlKey: true, shiftKey: true }), false), false, 'Ctrl-Shift-C copies');
  assert.equal(terminalTakesKey(key('c', { ctrlKey: true }), false), true, 'Ctrl-C alone interrupts');
  assert.equal(terminalTakesKey(key('d', { ctrlKey: true }), false), true);
  assert.equal(terminalTakesKey(key('v'), false), true);
  assert.equal(terminalTakesKey(key('v', { metaKey: true }), false), true, 'Cmd-V is xterm.js’s own');
  assert.equal(terminalTakesKey(key('v', { ctrlKey: true, altKey: true }), false), true);
});
