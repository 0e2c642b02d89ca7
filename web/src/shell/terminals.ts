// Terminals through the REST API, as Jupyter Server 2 serves them (/api/terminals), and the
// address of a terminal's WebSocket. With terminals off the pages' config says
// terminalsAvailable false (JupyterLab's option) and the server answers /api/terminals with 404,
// as Jupyter Server without terminals does; a 404 is taken as that answer.
import { ServerConnection } from '@jupyterlab/services';
import { api, serverSettings } from './server';

/** TerminalModel is Jupyter's model of a running terminal. */
export interface TerminalModel {
  name: string;
  /** When the terminal last had input or output (ISO 8601). */
  last_activity?: string;
}

function terminalPath(name: string): string {
  return 'api/terminals/' + encodeURIComponent(name);
}

/** listTerminals lists the user's terminals; undefined when the server has no terminals. */
export async function listTerminals(): Promise<TerminalModel[] | undefined> {
  try {
    return await api<TerminalModel[]>('api/terminals');
  } catch (err) {
    if (isNotFound(err)) {
      return undefined;
    }
    throw err;
  }
}

/** startTerminal starts a terminal whose shell starts in cwd (relative to the user's home;
 * '' is the home itself). */
export function startTerminal(cwd: string): Promise<TerminalModel> {
  return api<TerminalModel>('api/terminals', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(cwd === '' ? {} : { cwd }),
  });
}

/** shutDownTerminal ends a terminal (its shell and its pod). */
export async function shutDownTerminal(name: string): Promise<void> {
  await api<void>(terminalPath(name), { method: 'DELETE' });
}

/** terminalExists asks whether the server has the terminal: false on a 404 (shut down, ended,
 * someone else's, or terminals off); it throws when the server does not answer. */
export async function terminalExists(name: string): Promise<boolean> {
  try {
    await api<TerminalModel>(terminalPath(name));
    return true;
  } catch (err) {
    if (isNotFound(err)) {
      return false;
    }
    throw err;
  }
}

/** terminalSocketURL is the terminal's WebSocket: terminado's frames, authenticated as the
 * kernels' channels are (the login cookie; a WebSocket's GET needs no XSRF token, and the
 * server checks its Origin). */
export function terminalSocketURL(name: string): string {
  return serverSettings().wsUrl + 'terminals/websocket/' + encodeURIComponent(name);
}

function isNotFound(err: unknown): boolean {
  return err instanceof ServerConnection.ResponseError && err.response.status === 404;
}
