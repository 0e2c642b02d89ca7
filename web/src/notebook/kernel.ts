// The notebook's kernel: a session for its path (found or started) through the service
// client, its status as the page shows it, and requests to the kernel. A dropped WebSocket is
// reconnected by @jupyterlab/services with the same client id; the futures of executions in
// flight are kept by the kernel connection, so output the server replays lands in its cell.
import type { Kernel, KernelMessage, Session } from '@jupyterlab/services';
import type { Services } from '../shell/server';
import type { Completions } from './editor';

/** The status the page shows. */
export type ShownStatus = 'starting' | 'idle' | 'busy' | 'restarting' | 'dead' | 'reconnecting' | 'no kernel';

/** shownStatus is the page's status of a kernel's status and its connection's; everConnected
 * says whether the kernel has answered on this connection before (a new connection is then a
 * reconnection), prev what was shown (a restart's reconnection stays "restarting"). */
export function shownStatus(
  status: Kernel.Status | null,
  conn: Kernel.ConnectionStatus | null,
  everConnected: boolean,
  prev?: ShownStatus,
): ShownStatus {
  if (status === null) {
    return 'no kernel';
  }
  if (
    prev === 'restarting' &&
    (conn === 'connecting' || status === 'unknown' || status === 'restarting' || status === 'autorestarting')
  ) {
    return 'restarting';
  }
  if (status === 'dead' || status === 'terminating') {
    return 'dead';
  }
  if (conn === 'connecting') {
    return everConnected ? 'reconnecting' : 'starting';
  }
  if (conn === 'disconnected') {
    return 'dead';
  }
  switch (status) {
    case 'idle':
      return 'idle';
    case 'busy':
      return 'busy';
    case 'restarting':
    case 'autorestarting':
      return 'restarting';
    case 'unknown':
      // Just reconnected: the kernel's state is not known until it answers.
      return everConnected ? 'reconnecting' : 'starting';
    default:
      return 'starting';
  }
}

export interface ExecuteHandlers {
  onIOPub: (msg: KernelMessage.IIOPubMessage) => void;
  onInput: (prompt: string, password: boolean) => Promise<string>;
  onReply: (reply: KernelMessage.IExecuteReply) => void;
}

export class KernelSession {
  session: Session.ISessionConnection | null = null;
  private everConnected = false;
  private statusListeners: ((s: ShownStatus) => void)[] = [];
  private iopubListeners: ((m: KernelMessage.IIOPubMessage) => void)[] = [];
  private restartListeners: (() => void)[] = [];
  private last: ShownStatus = 'starting';
  private restarting = false;

  constructor(private manager: Services) {}

  get kernel(): Kernel.IKernelConnection | null {
    return this.session?.kernel ?? null;
  }

  get status(): ShownStatus {
    return this.last;
  }

  onStatus(l: (s: ShownStatus) => void): void {
    this.statusListeners.push(l);
  }

  /** onIOPub hears every IOPub message (update_display_data goes to the display registry). */
  onIOPub(l: (m: KernelMessage.IIOPubMessage) => void): void {
    this.iopubListeners.push(l);
  }

  /** follow hears IOPub messages until l answers true. */
  follow(l: (m: KernelMessage.IIOPubMessage) => boolean): void {
    const once = (m: KernelMessage.IIOPubMessage) => {
      if (l(m)) {
        this.iopubListeners = this.iopubListeners.filter((x) => x !== once);
      }
    };
    this.iopubListeners.push(once);
  }

  /** onRestart hears a restart (the kernel's executions in flight are then gone). */
  onRestart(l: () => void): void {
    this.restartListeners.push(l);
  }

  private update(): void {
    const k = this.kernel;
    let s = shownStatus(k ? k.status : null, k ? k.connectionStatus : null, this.everConnected, this.last);
    if (this.restarting && (s === 'reconnecting' || s === 'starting')) {
      s = 'restarting'; // the service client reconnects after a restart
    }
    if (s === 'idle' || s === 'busy') {
      this.everConnected = true;
    }
    if (s !== this.last) {
      this.last = s;
      for (const l of this.statusListeners) l(s);
    }
  }

  /** defaultKernelName is the kernel the notebook asks for, or the server's default. */
  async kernelName(wanted: string | undefined): Promise<string | undefined> {
    await this.manager.kernelspecs.ready;
    const specs = this.manager.kernelspecs.specs;
    if (wanted && specs && specs.kernelspecs[wanted]) {
      return wanted;
    }
    return specs?.default || wanted;
  }

  /** connect finds the notebook's session or starts one. */
  async connect(path: string, name: string, kernelName: string | undefined): Promise<void> {
    const sessions = this.manager.sessions;
    const model = await sessions.findByPath(path);
    let conn: Session.ISessionConnection;
    if (model && model.kernel && model.kernel.execution_state !== 'dead') {
      conn = sessions.connectTo({ model });
    } else {
      if (model) {
        // A session whose kernel died (e.g. the server restarted) is of no use: replace it.
        await sessions.shutdown(model.id).catch(() => undefined);
      }
      const kname = await this.kernelName(kernelName);
      conn = await sessions.startNew({ path, type: 'notebook', name, kernel: kname ? { name: kname } : undefined });
    }
    this.attach(conn);
  }

  private attach(conn: Session.ISessionConnection): void {
    this.session = conn;
    this.everConnected = false;
    conn.statusChanged.connect(() => this.update());
    conn.connectionStatusChanged.connect(() => this.update());
    conn.kernelChanged.connect(() => {
      this.everConnected = false;
      this.update();
    });
    conn.iopubMessage.connect((_, m) => {
      if (
        m.header.msg_type === 'status' &&
        (m.content as KernelMessage.IStatusMsg['content']).execution_state === 'restarting'
      ) {
        for (const l of this.restartListeners) l();
      }
      for (const l of this.iopubListeners) l(m);
    });
    this.update();
  }

  /** ready resolves once the kernel is connected and idle (or after the timeout). */
  whenIdle(timeoutMs = 120000): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      if (this.last === 'idle') {
        done();
        return;
      }
      this.onStatus((s) => {
        if (s === 'idle') {
          done();
        }
      });
    });
  }

  /** execute runs code, the source of the cell of cellId; handlers hear its output, input
   * requests and reply. The cell's id goes with the request (metadata.cellId, as JupyterLab
   * sends it), so that the server can write the outputs into the notebook when the page is
   * gone. The returned promise settles when the execution is done (or fails when the kernel
   * restarted). */
  execute(code: string, h: ExecuteHandlers, cellId?: string): Promise<void> {
    const k = this.kernel;
    if (!k) {
      return Promise.reject(new Error('no kernel'));
    }
    const future = k.requestExecute(
      {
        code,
        stop_on_error: true,
        allow_stdin: true,
        store_history: true,
        silent: false,
      },
      true,
      cellId === undefined ? undefined : { cellId },
    );
    future.onIOPub = (m) => h.onIOPub(m);
    future.onStdin = (m) => {
      if (m.header.msg_type !== 'input_request') {
        return;
      }
      const c = (m as KernelMessage.IInputRequestMsg).content;
      void h.onInput(c.prompt, c.password).then((value) => {
        this.kernel?.sendInputReply({ status: 'ok', value }, m.header as KernelMessage.IInputReplyMsg['parent_header']);
      });
    };
    future.onReply = (m) => h.onReply(m.content as KernelMessage.IExecuteReply);
    return future.done.then(() => undefined);
  }

  async complete(code: string, cursorPos: number): Promise<Completions | null> {
    const k = this.kernel;
    if (!k) {
      return null;
    }
    const r = await k.requestComplete({ code, cursor_pos: cursorPos });
    const c = r.content;
    if (c.status !== 'ok') {
      return null;
    }
    return {
      matches: c.matches,
      cursor_start: c.cursor_start,
      cursor_end: c.cursor_end,
      metadata: c.metadata,
    };
  }

  async inspect(code: string, cursorPos: number): Promise<Record<string, unknown> | null> {
    const k = this.kernel;
    if (!k) {
      return null;
    }
    const r = await k.requestInspect({ code, cursor_pos: cursorPos, detail_level: 0 });
    const c = r.content;
    if (c.status !== 'ok' || !c.found) {
      return null;
    }
    return c.data;
  }

  async interrupt(): Promise<void> {
    await this.kernel?.interrupt();
  }

  async restart(): Promise<void> {
    const k = this.kernel;
    if (!k) {
      return;
    }
    for (const l of this.restartListeners) l();
    this.restarting = true;
    try {
      await k.restart();
    } finally {
      this.restarting = false;
      this.update();
    }
  }

  async shutdown(): Promise<void> {
    const s = this.session;
    if (!s) {
      return;
    }
    try {
      await s.shutdown();
    } finally {
      s.dispose();
      this.session = null;
      // Shut down on purpose: no kernel, which the next run starts; not a kernel that died.
      this.last = 'no kernel';
      for (const l of this.statusListeners) l('no kernel');
    }
  }

  /** changeKernel gives the session a new kernel of spec name (the old one shuts down). */
  async changeKernel(name: string): Promise<void> {
    const s = this.session;
    if (!s) return;
    this.everConnected = false;
    await s.changeKernel({ name });
    this.update();
  }

  /** setPath tells the session that the notebook was renamed. */
  async setPath(path: string, name: string): Promise<void> {
    await this.session?.setPath(path);
    await this.session?.setName(name);
  }
}
