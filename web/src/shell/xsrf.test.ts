import { test } from 'node:test';
import assert from 'node:assert/strict';
import { retryingXSRF } from './xsrf';

const refusal = () =>
  new Response(JSON.stringify({ message: "'_xsrf' argument missing from PUT", reason: null }), {
    status: 403,
    headers: { 'Content-Type': 'application/json' },
  });

/** server answers each request with the next of answers, and keeps what it was sent. */
function server(...answers: (() => Response)[]) {
  const sent: { method: string; xsrf: string | null; body: string }[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit) => {
    const r = new Request(input, init);
    sent.push({ method: r.method, xsrf: r.headers.get('X-XSRFToken'), body: await r.text() });
    const next = answers.shift();
    assert.ok(next, `no answer left for request ${sent.length}`);
    return next();
  };
  return { fetch, sent };
}

const save = () => new Request('http://localhost/api/contents/a.ipynb', { method: 'PUT', body: '{"content":"kept"}' });

test('a save refused for XSRF is sent once more with the new cookie, the same body', async () => {
  const s = server(refusal, () => new Response('{}', { status: 200 }));
  let cookie: string | undefined;
  let refreshed = 0;
  const f = retryingXSRF(
    s.fetch,
    () => {
      refreshed++;
      cookie = 'fresh';
      return Promise.resolve();
    },
    () => cookie,
  );
  const r = await f(save());
  assert.equal(r.status, 200);
  assert.equal(refreshed, 1, 'the refusal brought no cookie: one is asked for');
  assert.deepEqual(s.sent, [
    { method: 'PUT', xsrf: null, body: '{"content":"kept"}' },
    { method: 'PUT', xsrf: 'fresh', body: '{"content":"kept"}' },
  ]);
});

test('a refusal that brought the cookie is retried without asking for one', async () => {
  let cookie: string | undefined;
  const s = server(
    () => {
      cookie = 'set-by-the-refusal';
      return refusal();
    },
    () => new Response('{}', { status: 201 }),
  );
  let refreshed = 0;
  const r = await retryingXSRF(
    s.fetch,
    () => Promise.resolve(refreshed++),
    () => cookie,
  )(save());
  assert.equal(r.status, 201);
  assert.equal(refreshed, 0);
  assert.equal(s.sent[1].xsrf, 'set-by-the-refusal');
});

test('a save refused twice is the second refusal, for the page to show; only once retried', async () => {
  const s = server(refusal, refusal);
  const r = await retryingXSRF(
    s.fetch,
    () => Promise.resolve(),
    () => 'stale',
  )(save());
  assert.equal(r.status, 403);
  assert.equal(s.sent.length, 2);
  assert.match(((await r.json()) as { message: string }).message, /_xsrf/);
});

test('reads, other refusals and other failures are not sent again', async () => {
  const forbidden = () => new Response(JSON.stringify({ message: 'Forbidden', reason: null }), { status: 403 });
  for (const [req, answer] of [
    [new Request('http://localhost/api/contents'), refusal],
    [save(), forbidden],
    [save(), () => new Response('{"message":"changed on disk"}', { status: 409 })],
    [save(), () => new Response('not json', { status: 403 })],
  ] as [Request, () => Response][]) {
    const s = server(answer);
    const r = await retryingXSRF(
      s.fetch,
      () => Promise.resolve(),
      () => 'x',
    )(req);
    assert.equal(s.sent.length, 1, `${req.method} ${r.status}`);
  }
});

test('without a cookie to be had, the refusal stands', async () => {
  const s = server(refusal);
  const r = await retryingXSRF(
    s.fetch,
    () => Promise.resolve(),
    () => undefined,
  )(save());
  assert.equal(r.status, 403);
  assert.equal(s.sent.length, 1);
});
