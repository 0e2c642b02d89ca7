import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ServerConnection } from '@jupyterlab/services';
import { installDOM } from '../testing/dom';
import { Alerts, errorText } from './alerts';

installDOM();

test('errorText says what the server said, else its status', async () => {
  const withMessage = await ServerConnection.ResponseError.create(
    new Response(JSON.stringify({ message: 'File already exists: x.ipynb', reason: 'Conflict' }), {
      status: 409,
      statusText: 'Conflict',
    }),
  );
  assert.equal(errorText(withMessage), 'File already exists: x.ipynb');
  const bare = await ServerConnection.ResponseError.create(
    new Response('oops', { status: 502, statusText: 'Bad Gateway' }),
  );
  assert.equal(errorText(bare), 'The server answered 502 Bad Gateway.');
  assert.equal(errorText(new Error('boom')), 'boom');
  const forbidden = await ServerConnection.ResponseError.create(
    new Response(JSON.stringify({ message: 'Forbidden', reason: null }), { status: 403 }),
  );
  assert.match(errorText(forbidden), /log in again/);
  const refused = await ServerConnection.ResponseError.create(
    new Response(JSON.stringify({ message: 'kernel spec r is not allowed' }), { status: 403 }),
  );
  assert.equal(errorText(refused), 'kernel spec r is not allowed');
});

test('Alerts: a role=alert area; actions replace, polling keeps its first error until it works again', () => {
  const a = new Alerts();
  document.body.replaceChildren(a.element);
  assert.equal(a.element.getAttribute('role'), 'alert');
  assert.equal(a.element.hidden, true);
  a.show(new Error('down'), 'Cannot list', 'listing');
  assert.equal(a.element.hidden, false);
  assert.match(a.element.textContent, /Cannot list: down/);
  a.show(new Error('down too'), 'Cannot list the clusters', 'clusters');
  assert.match(a.element.textContent, /Cannot list: down/, 'another poll does not flip the message');
  a.ok('clusters');
  assert.equal(a.element.hidden, false, 'only the source that showed it clears it');
  a.ok('listing');
  assert.equal(a.element.hidden, true);
  a.show(new Error('no'), 'Cannot delete x');
  a.ok('listing');
  assert.equal(a.element.hidden, false, 'action errors stay until dismissed');
  a.element.querySelector('button')!.click();
  assert.equal(a.element.hidden, true);
});
