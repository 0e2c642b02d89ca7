import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import { Clusters, clusterStatus, engineCount, parseEngines, type Cluster } from './clusters';

installDOM();

function cluster(profile: string, over: Partial<Cluster> = {}): Cluster {
  return { profile, status: 'stopped', n: 2, engines_ready: 0, controller_ready: false, ready: false, ...over };
}

test('status and engine counts', () => {
  assert.equal(clusterStatus(cluster('a')), 'stopped');
  assert.equal(clusterStatus(cluster('a', { status: 'running' })), 'starting controller');
  assert.equal(clusterStatus(cluster('a', { status: 'running', controller_ready: true })), 'starting engines');
  assert.equal(clusterStatus(cluster('a', { status: 'running', controller_ready: true, ready: true })), 'running');
  assert.equal(engineCount(cluster('a', { engines_ready: 3, n: 4 })), '3 / 4');
});

test('parseEngines takes whole numbers 0-1024', () => {
  assert.equal(parseEngines('0'), 0);
  assert.equal(parseEngines(' 8 '), 8);
  assert.equal(parseEngines('1024'), 1024);
  assert.equal(parseEngines('1025'), undefined);
  assert.equal(parseEngines('-1'), undefined);
  assert.equal(parseEngines('2.5'), undefined);
  assert.equal(parseEngines(''), undefined);
});

test('rows: labelled number input, Start with n, Stop, and typed numbers survive polling', () => {
  const calls: string[] = [];
  const view = new Clusters({ start: (p, n) => calls.push(`start ${p} ${n}`), stop: (p) => calls.push(`stop ${p}`) });
  document.body.replaceChildren(view.element);
  view.update([
    cluster('default'),
    cluster('big', { status: 'running', n: 8, engines_ready: 8, controller_ready: true, ready: true }),
  ]);
  const row = view.element.querySelector<HTMLTableRowElement>('tr[data-profile=default]')!;
  const input = row.querySelector<HTMLInputElement>('input[type=number]')!;
  const label = view.element.querySelector<HTMLLabelElement>(`label[for="${input.id}"]`)!;
  assert.equal(label.textContent, 'Engines for default');
  assert.equal(input.value, '2');
  input.value = '5';
  input.dispatchEvent(new window.Event('input', { bubbles: true }));
  view.update([
    cluster('default', { n: 2 }),
    cluster('big', { status: 'running', n: 8, engines_ready: 8, ready: true }),
  ]);
  assert.equal(input.value, '5', 'polling does not overwrite what the user typed');
  row.querySelector<HTMLButtonElement>('button[data-action=start]')!.click();
  // Stop on a stopped cluster does nothing; on a running one it stops it.
  row.querySelector<HTMLButtonElement>('button[data-action=stop]')!.click();
  view.element.querySelector<HTMLButtonElement>('tr[data-profile=big] button[data-action=stop]')!.click();
  assert.deepEqual(calls, ['start default 5', 'stop big']);
  assert.equal(row.querySelector('button[data-action=start]')!.getAttribute('aria-label'), 'Start default');
  assert.equal(view.element.querySelector<HTMLTableRowElement>('tr[data-profile=big]')!.cells[2].textContent, '8 / 8');
  view.update([]);
  assert.equal(view.element.querySelectorAll('tr[data-profile]').length, 0);
});
