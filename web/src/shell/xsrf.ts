// The _xsrf cookie is a session cookie and the login cookie lasts 30 days: after a browser
// restart a page (restored, or open while the cookie went) has its login and no XSRF token,
// and every change it sends is refused (403, "'_xsrf' argument missing from PUT") until the
// user logs out. nbkube sets a new cookie on any answer to the login, the refusal included;
// the pages' requests go through retryingXSRF, which sends a change refused for XSRF once
// more with the new cookie's token, so that a save is not lost to it.

/** cookie is the value of the page's cookie name, as JupyterLab's client reads it (the last
 * one when several paths set it). */
export function cookie(name: string): string | undefined {
  let all: string;
  try {
    all = document.cookie;
  } catch {
    return undefined; // a sandboxed document has no cookies
  }
  let value: string | undefined;
  for (const part of all.split(';')) {
    const p = part.trim();
    if (p.startsWith(name + '=')) {
      value = p.slice(name.length + 1);
    }
  }
  return value;
}

/** isXSRFRefusal says whether an answer refuses a request for its XSRF token: 403 with the
 * message of Jupyter Server's (Tornado's) check, which nbkube's repeats. */
export async function isXSRFRefusal(response: Response): Promise<boolean> {
  if (response.status !== 403) {
    return false;
  }
  try {
    const body = (await response.clone().json()) as { message?: unknown };
    return typeof body.message === 'string' && /_xsrf|XSRF/.test(body.message);
  } catch {
    return false;
  }
}

type Fetch = (input: RequestInfo | URL, init?: RequestInit) => Promise<Response>;

/** retryingXSRF wraps fetch: a request that changes something and is refused for its XSRF
 * token is sent once more with the token of the _xsrf cookie as it is now, after refresh()
 * when the refusal brought no cookie (a server that sets it only on pages). Anything else,
 * and the second answer whatever it is, goes back to the caller as it came: a save refused
 * twice is an error the page shows, its notebook still unsaved. */
export function retryingXSRF(
  fetch: Fetch,
  refresh: () => Promise<unknown>,
  xsrf: () => string | undefined = () => cookie('_xsrf'),
): Fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    if (['GET', 'HEAD', 'OPTIONS'].includes(request.method)) {
      return fetch(request);
    }
    // The body can be sent only once: keep a copy for the retry.
    const spare = request.clone();
    const response = await fetch(request);
    if (!(await isXSRFRefusal(response))) {
      return response;
    }
    if (xsrf() === undefined) {
      await refresh().catch(() => undefined);
    }
    const token = xsrf();
    if (token === undefined) {
      return response;
    }
    const headers = new Headers(spare.headers);
    headers.set('X-XSRFToken', token);
    return fetch(new Request(spare, { headers }));
  };
}
