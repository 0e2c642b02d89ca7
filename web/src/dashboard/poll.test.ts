import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { Poller } from './poll';

function fakeDoc() {
  const listeners: (() => void)[] = [];
  return {
    hidden: false,
    addEventListener: (_: string, f: () => void) => listeners.push(f),
    fire() {
      listeners.forEach((f) => f());
    },
  };
}

const tick = () => new Promise<void>((r) => setImmediate(r));

test('Poller runs now, then every interval, and pauses while hidden', async () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    let runs = 0;
    const doc = fakeDoc();
    const p = new Poller(() => Promise.resolve(void runs++), 1000, doc as unknown as Document);
    await p.start();
    assert.equal(runs, 1);
    mock.timers.tick(1000);
    await tick();
    assert.equal(runs, 2);
    doc.hidden = true;
    doc.fire();
    mock.timers.tick(5000);
    await tick();
    assert.equal(runs, 2, 'no polling while hidden');
    doc.hidden = false;
    doc.fire();
    await tick();
    assert.equal(runs, 3, 'at once when seen again');
    mock.timers.tick(1000);
    await tick();
    assert.equal(runs, 4);
  } finally {
    mock.timers.reset();
  }
});

test('Poller.refresh during a run makes one more run after it, never two at once', async () => {
  let active = 0;
  let most = 0;
  let runs = 0;
  let release: () => void = () => {};
  const p = new Poller(
    async () => {
      runs++;
      active++;
      most = Math.max(most, active);
      await new Promise<void>((r) => (release = r));
      active--;
    },
    60_000,
    fakeDoc() as unknown as Document,
  );
  const first = p.refresh();
  const a = p.refresh();
  const b = p.refresh();
  assert.equal(a, b, 'refreshes during a run share the next run');
  release();
  await first;
  await tick();
  release();
  await a;
  assert.equal(runs, 2);
  assert.equal(most, 1);
});

test('Poller goes on after a failing task', async () => {
  let runs = 0;
  const p = new Poller(
    () => {
      runs++;
      return Promise.reject(new Error('boom'));
    },
    60_000,
    fakeDoc() as unknown as Document,
  );
  await p.refresh();
  await p.refresh();
  assert.equal(runs, 2);
});
