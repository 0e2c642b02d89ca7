// The pages talk to the server only through its public API, with JupyterLab's own service
// client: cookies carry the login, and the client sends the _xsrf cookie back as
// X-XSRFToken, as JupyterLab does (and once more when it was missing: xsrf.ts).
import {
  ContentsManager,
  KernelManager,
  KernelSpecManager,
  ServerConnection,
  SessionManager,
  type Contents,
  type Kernel,
  type KernelSpec,
  type Session,
} from '@jupyterlab/services';
import { config } from './config';
import { retryingXSRF } from './xsrf';

let settings: ServerConnection.ISettings | undefined;

/** serverSettings are the service client's settings for this server. */
export function serverSettings(): ServerConnection.ISettings {
  if (!settings) {
    const base = new URL(config().baseUrl, window.location.href);
    const ws = new URL(base.href);
    ws.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';
    settings = ServerConnection.makeSettings({
      baseUrl: base.href,
      wsUrl: ws.href,
      appendToken: false,
      token: '',
      // A change refused for want of the _xsrf cookie (gone with a browser restart) is sent
      // again with the new one; GET /api/me gets one when the refusal brought none.
      fetch: retryingXSRF(
        (input, init) => window.fetch(input, init),
        () => window.fetch(new URL('api/me', base).href, { credentials: 'same-origin', cache: 'no-store' }),
      ),
    });
  }
  return settings;
}

/** Services are the managers of the services the pages use. */
export interface Services {
  readonly contents: Contents.IManager;
  readonly kernels: Kernel.IManager;
  readonly sessions: Session.IManager;
  readonly kernelspecs: KernelSpec.IManager;
}

let manager: Services | undefined;

/** services are the page's managers of contents, kernels, sessions and kernel specs: those
 * of JupyterLab's ServiceManager that the pages use, without the others (terminals, events,
 * settings, workspaces...), which would poll routes nbkube does not serve. */
export function services(): Services {
  if (!manager) {
    const conn = serverSettings();
    const kernels = new KernelManager({ serverSettings: conn });
    manager = {
      contents: new ContentsManager({ serverSettings: conn }),
      kernels,
      sessions: new SessionManager({ serverSettings: conn, kernelManager: kernels }),
      kernelspecs: new KernelSpecManager({ serverSettings: conn }),
    };
  }
  return manager;
}

/** api makes a request of the server's REST API (for what the service client has no call for,
 * e.g. /api/clusters), and throws an Error with Jupyter's message on a failure. */
export async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  const s = serverSettings();
  const response = await ServerConnection.makeRequest(s.baseUrl + path, init, s);
  if (!response.ok) {
    throw await ServerConnection.ResponseError.create(response);
  }
  if (response.status === 204) {
    return undefined as T;
  }
  return (await response.json()) as T;
}
