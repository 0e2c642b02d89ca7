import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installDOM } from '../testing/dom';
import {
  mayMakeClusters,
  Clusters,
  NewCluster,
  clusterStatus,
  engineCount,
  parseEngines,
  profileProblem,
  type Cluster,
} from './clusters';

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
  const view = new Clusters({
    start: (p, n) => calls.push(`start ${p} ${n}`),
    stop: (p) => calls.push(`stop ${p}`),
    remove: (p) => calls.push(`delete ${p}`),
  });
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
  view.element.querySelector<HTMLButtonElement>('tr[data-profile=big] button[aria-label="Delete big"]')!.click();
  assert.deepEqual(calls, ['start default 5', 'stop big', 'delete big']);
  assert.equal(row.querySelector('button[data-action=start]')!.getAttribute('aria-label'), 'Start default');
  assert.equal(view.element.querySelector<HTMLTableRowElement>('tr[data-profile=big]')!.cells[3].textContent, '8 / 8');
  view.update([]);
  assert.equal(view.element.querySelectorAll('tr[data-profile]').length, 0);
});

test('profileProblem follows the API: a DNS label of at most 40 characters', () => {
  for (const ok of ['a', 'analysis', 'x-2', 'a'.repeat(40)]) {
    assert.equal(profileProblem(ok), '', ok);
  }
  for (const bad of ['', 'A', '-x', 'x-', 'a/b', 'a.b', 'a b', 'a'.repeat(41)]) {
    assert.notEqual(profileProblem(bad), '', bad);
  }
});

test('the new cluster form: checks the name and engines, creates, and clears the name once made', async () => {
  const asked: string[] = [];
  let answer = false;
  const form = new NewCluster((p, n, framework) => {
    asked.push(`${p} ${n} ${framework}`);
    return Promise.resolve(answer);
  });
  document.body.replaceChildren(form.element);
  assert.equal(document.querySelector(`label[for="${form.name.id}"]`)!.textContent, 'New cluster');
  assert.equal(document.querySelector(`label[for="${form.engines.id}"]`)!.textContent, 'Engines');
  assert.equal(document.querySelector(`label[for="${form.framework.id}"]`)!.textContent, 'Framework');
  assert.equal(form.framework.value, 'ipyparallel', 'ipyparallel unless asked');
  assert.equal(form.engines.value, '2');
  const submit = () => form.element.dispatchEvent(new window.Event('submit', { cancelable: true }));

  form.name.value = 'Bad Name';
  submit();
  assert.deepEqual(asked, [], 'a bad name is not sent');
  assert.notEqual(form.name.validationMessage, '');
  form.name.value = 'work';
  form.name.dispatchEvent(new window.Event('input'));
  form.engines.value = '2000';
  submit();
  assert.deepEqual(asked, [], 'too many engines are not sent');

  form.engines.value = '3';
  answer = false;
  submit();
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(asked, ['work 3 ipyparallel']);
  assert.equal(form.name.value, 'work', 'a refused name stays for the user to change');
  answer = true;
  form.framework.value = 'dask';
  submit();
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(asked, ['work 3 ipyparallel', 'work 3 dask']);
  assert.equal(form.name.value, '', 'the name is cleared once made');
});

test('a dask cluster shows its framework, its workers and, while its scheduler runs, its dashboard', () => {
  const view = new Clusters({ start() {}, stop() {}, remove() {} });
  const dask = cluster('d', {
    framework: 'dask',
    status: 'running',
    controller_ready: false,
    dashboard_url: '/dask/d/',
  });
  view.update([dask, cluster('p')]);
  const row = view.element.querySelector<HTMLTableRowElement>('tr[data-profile=d]')!;
  const link = row.querySelector<HTMLAnchorElement>('a.nb-dashboard-link')!;
  assert.equal(row.cells[1].textContent, 'Dask');
  assert.equal(row.cells[2].textContent, 'starting scheduler');
  assert.equal(link.hidden, true, 'no dashboard before the scheduler answers');
  view.update([{ ...dask, controller_ready: true }, cluster('p')]);
  assert.equal(row.cells[2].textContent, 'starting workers');
  assert.equal(link.hidden, false);
  assert.equal(link.getAttribute('href'), '/dask/d/');
  assert.equal(link.getAttribute('rel'), 'noopener');
  view.update([{ ...dask, status: 'stopped' }, cluster('p')]);
  assert.equal(link.hidden, true, 'no dashboard once stopped');
  const ipp = view.element.querySelector<HTMLTableRowElement>('tr[data-profile=p]')!;
  assert.equal(ipp.cells[1].textContent, 'ipyparallel');
  assert.equal(ipp.querySelector<HTMLAnchorElement>('a.nb-dashboard-link')!.hidden, true, 'ipyparallel has none');
});

test('the form is for users whose policies leave them engines', () => {
  assert.equal(mayMakeClusters({}), true, 'no policies');
  assert.equal(mayMakeClusters({ quota: { limits: { engines: null } } }), true, 'no engines limit');
  assert.equal(mayMakeClusters({ quota: { limits: { engines: 4 } } }), true);
  assert.equal(mayMakeClusters({ quota: { limits: { engines: 0 } } }), false);
});
