import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  parseFrame,
  reconnectDelay,
  TerminalConnection,
  type ConnectionState,
  type EndReason,
  type Socket,
} from './connection';

/** FakeSocket is one WebSocket of the page, the server's side played by the test. */
class FakeSocket implements Socket {
  onopen: Socket['onopen'] = null;
  onmessage: Socket['onmessage'] = null;
  onclose: Socket['onclose'] = null;
  onerror: Socket['onerror'] = null;
  readonly sent: unknown[] = [];
  closedWith: number | undefined;

  send(data: string): void {
    this.sent.push(JSON.parse(data));
  }
  close(code?: number): void {
    this.closedWith = code;
  }
  /** frame is a frame from the server. */
  frame(...msg: unknown[]): void {
    this.onmessage?.({ data: JSON.stringify(msg) } as MessageEvent);
  }
  /** drop is the server or the network closing the socket. */
  drop(code = 1006): void {
    this.onerror?.({} as Event);
    this.onclose?.({ code } as CloseEvent);
  }
}

/** harness is a connection whose sockets, checks and timers the test drives. */
function harness(exists: () => Promise<boolean> = () => Promise.resolve(true)) {
  const sockets: FakeSocket[] = [];
  const timers: { fn: () => void; ms: number; cancelled: boolean }[] = [];
  const log: string[] = [];
  const states: [ConnectionState, EndReason | undefined][] = [];
  let checks = 0;
  const conn = new TerminalConnection(
    {
      url: 'ws://localhost/terminals/websocket/1',
      exists: () => {
        checks++;
        return exists();
      },
      openSocket: (url) => {
        assert.equal(url, 'ws://localhost/terminals/websocket/1');
        const s = new FakeSocket();
        sockets.push(s);
        return s;
      },
      delay: (n) => 100 * 2 ** n,
      schedule: (fn, ms) => {
        const t = { fn, ms, cancelled: false };
        timers.push(t);
        return () => (t.cancelled = true);
      },
    },
    {
      output: (text) => log.push('out ' + text),
      setup: () => log.push('setup'),
      state: (s, reason) => states.push([s, reason]),
    },
  );
  /** fire runs the last timer, as if its time had come. */
  const fire = () => {
    const t = timers.at(-1);
    assert.ok(t && !t.cancelled, 'a reconnection is scheduled');
    t.fn();
  };
  return { conn, sockets, timers, log, states, fire, checks: () => checks, last: () => sockets.at(-1)! };
}

/** settle lets the connection's awaited check finish. */
const settle = () => new Promise((r) => setTimeout(r, 0));

test('parseFrame reads setup, stdout and disconnect, and nothing else', () => {
  assert.deepEqual(parseFrame('["setup", {}]'), { kind: 'setup' });
  assert.deepEqual(parseFrame('["stdout", "a\\r\\nb"]'), { kind: 'stdout', text: 'a\r\nb' });
  assert.deepEqual(parseFrame('["disconnect", 1]'), { kind: 'disconnect' });
  for (const bad of [
    '["stdout", 42]',
    '["stdin", "x"]',
    '{"stdout": "x"}',
    'not json',
    '[]',
    '"stdout"',
    new ArrayBuffer(2),
  ]) {
    assert.equal(parseFrame(bad), undefined, typeof bad === 'string' ? bad : 'binary');
  }
});

test('reconnectDelay doubles from 250 ms to at most 30 s, in the upper half', () => {
  assert.equal(reconnectDelay(0, 0), 125);
  assert.equal(reconnectDelay(0, 1), 250);
  assert.equal(reconnectDelay(3, 1), 2000);
  assert.equal(reconnectDelay(3, 0.5), 1500);
  assert.equal(reconnectDelay(20, 1), 30000);
  assert.equal(reconnectDelay(1000, 0), 15000);
});

test('output is shown after setup; keys go as stdin, only while connected', () => {
  const { conn, log, states, last } = harness();
  conn.start();
  assert.equal(conn.state, 'connecting');
  assert.equal(conn.send('ls\r'), false, 'no keys before setup');
  last().frame('setup', {});
  assert.equal(conn.state, 'connected');
  last().frame('stdout', '$ ');
  last().frame('stdout', 'echo hi\r\nhi\r\n');
  last().frame('weird', 1);
  assert.deepEqual(log, ['setup', 'out $ ', 'out echo hi\r\nhi\r\n']);
  assert.equal(conn.send('echo $((6*7))\r'), true);
  assert.equal(conn.send(''), false);
  assert.deepEqual(last().sent, [['stdin', 'echo $((6*7))\r']]);
  assert.deepEqual(states, [['connected', undefined]]);
});

test('the size goes as set_size: on each new connection, then only when it changes', () => {
  const { conn, sockets, last, fire } = harness();
  conn.resize(24, 80);
  conn.start();
  assert.deepEqual(last().sent, [], 'nothing before setup');
  last().frame('setup', {});
  conn.resize(24, 80);
  conn.resize(30, 100.7);
  conn.resize(0, 100);
  conn.resize(NaN, 10);
  assert.deepEqual(last().sent, [
    ['set_size', 24, 80],
    ['set_size', 30, 100],
  ]);
  // A new connection is told the size again: the server sizes the pty to its clients.
  last().drop();
  return settle().then(() => {
    fire();
    assert.equal(sockets.length, 2);
    last().frame('setup', {});
    assert.deepEqual(last().sent, [['set_size', 30, 100]]);
  });
});

test('a dropped socket is opened again while the terminal exists, each wait longer, and setup starts the view over', async () => {
  const { conn, sockets, timers, log, states, last, fire, checks } = harness();
  conn.start();
  last().frame('setup', {});
  last().frame('stdout', 'before');
  for (const code of [1006, 1001, 1000]) {
    last().drop(code);
    assert.equal(conn.state, 'reconnecting', `closed with ${code}`);
    assert.equal(conn.send('x'), false, 'no keys while reconnecting');
    await settle();
    fire();
  }
  assert.equal(checks(), 3, 'the terminal was asked for before each attempt');
  assert.deepEqual(
    timers.map((t) => t.ms),
    [100, 200, 400],
  );
  assert.equal(sockets.length, 4);
  // Attempts that fail before setup keep growing the wait...
  last().drop();
  await settle();
  assert.equal(timers.at(-1)!.ms, 800);
  fire();
  // ... and a view of the terminal (setup, then its replayed output) starts them over.
  last().frame('setup', {});
  last().frame('stdout', 'before');
  assert.equal(conn.state, 'connected');
  last().drop();
  await settle();
  assert.equal(timers.at(-1)!.ms, 100);
  assert.deepEqual(log, ['setup', 'out before', 'setup', 'out before']);
  assert.deepEqual(
    states.map(([s]) => s),
    ['connected', 'reconnecting', 'connected', 'reconnecting'],
  );
});

test('"disconnect" ends the terminal: the socket is closed, nothing is opened again', async () => {
  const { conn, sockets, timers, states, last } = harness();
  conn.start();
  last().frame('setup', {});
  last().frame('stdout', 'exit\r\n');
  last().frame('disconnect', 1);
  assert.equal(conn.state, 'ended');
  assert.deepEqual(states.at(-1), ['ended', 'exited']);
  assert.equal(last().closedWith, 1000);
  last().drop(1000);
  last().frame('stdout', 'late');
  await settle();
  assert.equal(sockets.length, 1);
  assert.equal(timers.length, 0);
  assert.equal(conn.send('x'), false);
});

test('a 404 for the terminal ends it; a check the server does not answer is tried again', async () => {
  const answers: (boolean | Error)[] = [new Error('Failed to fetch'), true, false];
  const { conn, sockets, timers, states, last, fire } = harness(() => {
    const a = answers.shift()!;
    return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
  });
  conn.start();
  last().frame('setup', {});
  last().drop();
  await settle();
  assert.equal(conn.state, 'reconnecting', 'the server did not answer: maybe it restarts');
  fire();
  last().drop();
  await settle();
  fire();
  last().drop();
  await settle();
  assert.equal(conn.state, 'ended');
  assert.deepEqual(states.at(-1), ['ended', 'gone']);
  assert.equal(timers.length, 2, 'no attempt after the 404');
  assert.equal(sockets.length, 3);
});

test('a terminal that is not there ends at the first attempt, never connected', async () => {
  const { conn, states, last } = harness(() => Promise.resolve(false));
  conn.start();
  last().drop();
  assert.equal(conn.state, 'connecting', 'never connected: not a reconnection');
  await settle();
  assert.deepEqual(states, [['ended', 'gone']]);
});

test('dispose closes the socket and cancels the next attempt', async () => {
  const { conn, timers, last } = harness();
  conn.start();
  last().frame('setup', {});
  last().drop();
  await settle();
  conn.dispose();
  assert.equal(timers.at(-1)!.cancelled, true);
  const h2 = harness();
  h2.conn.start();
  h2.conn.dispose();
  assert.equal(h2.last().closedWith, 1000);
  assert.equal(h2.last().onclose, null, 'its close is not heard');
});
