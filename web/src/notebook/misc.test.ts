import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fromCodePoints, toCodePoints } from './editor';
import { shownStatus } from './kernel';
import { isNewer } from '../shell/saver';
import { withIpynb } from './save';

test('kernel status as shown: connecting after a connection is reconnecting', () => {
  assert.equal(shownStatus('idle', 'connected', true), 'idle');
  assert.equal(shownStatus('busy', 'connected', true), 'busy');
  assert.equal(shownStatus('busy', 'connecting', true), 'reconnecting');
  assert.equal(shownStatus('unknown', 'connecting', false), 'starting');
  assert.equal(shownStatus('unknown', 'connected', false), 'starting');
  assert.equal(shownStatus('unknown', 'connected', true), 'reconnecting');
  assert.equal(shownStatus('starting', 'connected', true), 'starting');
  assert.equal(shownStatus('restarting', 'connected', true), 'restarting');
  assert.equal(shownStatus('autorestarting', 'connected', true), 'restarting');
  assert.equal(shownStatus('dead', 'connected', true), 'dead');
  assert.equal(shownStatus('idle', 'disconnected', true), 'dead');
  assert.equal(shownStatus(null, null, false), 'no kernel');
  // A restart reconnects; it shows as restarting until the kernel answers.
  assert.equal(shownStatus('unknown', 'connecting', true, 'restarting'), 'restarting');
  assert.equal(shownStatus('starting', 'connected', true, 'restarting'), 'starting');
  assert.equal(shownStatus('idle', 'connected', true, 'restarting'), 'idle');
});

test('cursor positions convert between UTF-16 and code points', () => {
  const s = 'a😀b';
  assert.equal(toCodePoints(s, 0), 0);
  assert.equal(toCodePoints(s, 3), 2);
  assert.equal(toCodePoints(s, 4), 3);
  assert.equal(fromCodePoints(s, 2), 3);
  assert.equal(fromCodePoints(s, 3), 4);
  assert.equal(fromCodePoints('abc', 2), 2);
});

test('the file changed on the server when its time is later than ours', () => {
  assert.equal(isNewer('2026-01-01T00:00:02Z', '2026-01-01T00:00:00Z'), true);
  assert.equal(isNewer('2026-01-01T00:00:00.200Z', '2026-01-01T00:00:00Z'), false);
  assert.equal(isNewer('2026-01-01T00:00:00Z', '2026-01-01T00:00:05Z'), false);
  assert.equal(isNewer(undefined, '2026-01-01T00:00:00Z'), false);
});

test('rename adds .ipynb', () => {
  assert.equal(withIpynb('a'), 'a.ipynb');
  assert.equal(withIpynb('a.IPYNB'), 'a.IPYNB');
});
