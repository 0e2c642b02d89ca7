// JupyterLab's own terminal client (TerminalManager, TerminalConnection and the REST calls of
// @jupyterlab/services) drives nbkube's terminals the way JupyterLab's terminal panel does:
// start a terminal (in a directory), type, resize, attach a second view, reconnect, shut down.
// The Go e2e test starts nbkube and runs this with NBKUBE_URL and NBKUBE_TOKEN set;
// run-against-jupyter.sh runs it against Debian's Jupyter Server with terminado, the
// reference behaviour.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { PageConfig } from '@jupyterlab/coreutils';
import { ContentsManager, ServerConnection, TerminalAPI, TerminalManager } from '@jupyterlab/services';
import { waitFor, within } from './wait.mjs';

const baseUrl = process.env.NBKUBE_URL;
const token = process.env.NBKUBE_TOKEN;

// A terminal start is a pod start under nbkube; these hold on a busy machine.
const TEST_MS = 90_000;
const STEP_MS = 45_000;

// JupyterLab reads whether the server has terminals from its page's config, which both servers
// set from the same fact (terminado importable; nbkube's --terminals). A client in node has no
// page, so it is told here as the page would tell it.
PageConfig.setOption('terminalsAvailable', 'true');

function settings() {
  assert.ok(baseUrl && token, 'NBKUBE_URL and NBKUBE_TOKEN must be set');
  return ServerConnection.makeSettings({ baseUrl, token, WebSocket, appendToken: true });
}

// One JupyterLab tab's terminal manager. Whatever the test started is shut down afterwards even
// when it failed, so that no shell outlives its test.
function client(t) {
  const serverSettings = settings();
  const terminals = new TerminalManager({ serverSettings });
  const started = new Set();
  t.after(async () => {
    try {
      const live = new Set((await TerminalAPI.listRunning(serverSettings)).map((m) => m.name));
      for (const name of started) {
        if (live.has(name)) await TerminalAPI.shutdownTerminal(name, serverSettings);
      }
    } finally {
      // As in kernels.test.mjs: a disposed Poll leaves its next timer armed unless stopped.
      await terminals._pollModels?.stop();
      terminals.dispose();
    }
  });
  return {
    serverSettings,
    terminals,
    async start(options = {}) {
      const conn = await within(terminals.startNew(options), STEP_MS, 'start terminal');
      started.add(conn.name);
      return view(conn);
    },
  };
}

// view follows what a terminal connection shows: everything it has printed so far.
function view(conn) {
  const v = { conn, out: '', disconnected: false };
  conn.messageReceived.connect((_, msg) => {
    if (msg.type === 'stdout') v.out += msg.content[0];
    if (msg.type === 'disconnect') v.disconnected = true;
  });
  v.connected = () =>
    waitFor(conn.connectionStatusChanged, () => conn.connectionStatus === 'connected', `${conn.name} connected`, STEP_MS);
  v.sees = (re, what) => waitFor(conn.messageReceived, () => re.test(v.out), `${what} (output so far ${JSON.stringify(v.out)})`, STEP_MS);
  v.type = (text) => conn.send({ type: 'stdin', content: [text] });
  return v;
}

async function get(serverSettings, path) {
  return ServerConnection.makeRequest(`${serverSettings.baseUrl}${path}`, {}, serverSettings);
}

test('a terminal started by TerminalManager runs a shell, is listed and takes a size', { timeout: TEST_MS }, async (t) => {
  const c = client(t);
  await within(c.terminals.ready, STEP_MS, 'terminal manager ready');
  const term = await c.start();
  assert.match(term.conn.name, /^\w+$/, 'a terminal name is a word, as terminado routes it');
  await term.connected();

  // Arithmetic the shell does, so the marker is the shell's output and not the typed echo.
  term.type('echo marker-$((6*7))\r');
  await term.sees(/marker-42/, 'the shell ran the line');

  await c.terminals.refreshRunning();
  assert.ok([...c.terminals.running()].some((m) => m.name === term.conn.name), 'the manager lists the terminal');
  const r = await get(c.serverSettings, `api/terminals/${term.conn.name}`);
  assert.equal(r.status, 200);
  const model = await r.json();
  assert.equal(model.name, term.conn.name);
  assert.ok(!Number.isNaN(Date.parse(model.last_activity)), `last_activity is a time: ${JSON.stringify(model)}`);

  // What JupyterLab's terminal widget sends when it is laid out, then what stty says of it.
  term.conn.send({ type: 'set_size', content: [31, 97, 600, 800] });
  term.type('stty size\r');
  await term.sees(/31 97/, 'the pty took the size');
});

test('a terminal starts in the directory asked for', { timeout: TEST_MS }, async (t) => {
  const c = client(t);
  const contents = new ContentsManager({ serverSettings: c.serverSettings });
  const dir = await contents.newUntitled({ type: 'directory' });
  t.after(() => contents.delete(dir.path));
  const term = await c.start({ cwd: dir.path });
  await term.connected();
  term.type('echo "in:$(basename "$PWD")"\r');
  await term.sees(new RegExp(`in:${dir.name}\\r?\\n`), 'the shell runs in the directory');
});

test('a second view gets the output again, a reconnect goes on, a shutdown ends both', { timeout: TEST_MS }, async (t) => {
  const c = client(t);
  const first = await c.start();
  await first.connected();
  first.type('echo replay-$((40+2))\r');
  await first.sees(/replay-42/, 'the first view saw the output');

  // A second tab opened on the same terminal (connectTo, as JupyterLab restores a layout).
  const second = view(c.terminals.connectTo({ model: { name: first.conn.name } }));
  await second.connected();
  await second.sees(/replay-42/, 'the second view got what the terminal printed before it came');

  // Both views see what either types.
  second.type('echo both-$((50+8))\r');
  await first.sees(/both-58/, 'the first view saw the second view’s line');

  // A reconnect (after a network drop) comes back to the same shell.
  await within(first.conn.reconnect(), STEP_MS, 'reconnect');
  assert.equal(first.conn.connectionStatus, 'connected');
  first.type('echo again-$((60+6))\r');
  await first.sees(/again-66/, 'the shell answered after the reconnect');

  await within(c.terminals.shutdown(first.conn.name), STEP_MS, 'shut down');
  assert.ok(![...c.terminals.running()].some((m) => m.name === first.conn.name), 'the manager no longer lists it');
  const listed = await TerminalAPI.listRunning(c.serverSettings);
  assert.ok(!listed.some((m) => m.name === first.conn.name), `the server no longer lists it: ${JSON.stringify(listed)}`);
  const r = await get(c.serverSettings, `api/terminals/${first.conn.name}`);
  assert.equal(r.status, 404);
  await waitFor(
    second.conn.connectionStatusChanged,
    () => second.disconnected || second.conn.isDisposed || second.conn.connectionStatus !== 'connected',
    'the other view was let go',
    STEP_MS,
  );
});
