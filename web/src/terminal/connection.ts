// A terminal's connection: terminado's JSON frames over the server's WebSocket
// (<base>/terminals/websocket/<name>), as Jupyter Server's terminals speak them. Server to
// client: ["setup", {}] when a view of the terminal begins (the server then replays the
// terminal's recent output), ["stdout", text], ["disconnect", 1] when the shell ended. Client
// to server: ["stdin", text] and ["set_size", rows, cols].
//
// Not @jupyterlab/services' TerminalConnection, which the page would otherwise use: that one
// stops after seven attempts, does not try again when the server closes the socket cleanly
// (1000 or 1001: a replica that stops, a proxy's idle timeout), and cannot tell a terminal that
// ended from a network that failed. Here a dropped socket is opened again, after a growing
// delay, for as long as GET /api/terminals/<name> does not say 404; a 404, or "disconnect",
// ends the terminal for good.

/** The states of a connection, as the page shows them. */
export type ConnectionState = 'connecting' | 'connected' | 'reconnecting' | 'ended';

/** Why a terminal ended: its shell exited ("disconnect"), or the server has no such terminal
 * (404: shut down, culled, someone else's, never there). */
export type EndReason = 'exited' | 'gone';

/** Socket is what the connection uses of a browser's WebSocket. */
export interface Socket {
  onopen: ((ev: Event) => void) | null;
  onmessage: ((ev: MessageEvent) => void) | null;
  onclose: ((ev: CloseEvent) => void) | null;
  onerror: ((ev: Event) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

/** ConnectionEvents are what the connection tells the page. */
export interface ConnectionEvents {
  /** output is the shell's output, for the terminal to show. */
  output(text: string): void;
  /** setup begins a view of the terminal: its recent output comes next, so the terminal is to
   * show nothing else (after a reconnection, what it showed would be there twice). */
  setup(): void;
  /** state is the connection's new state; reason says why an ended terminal ended. */
  state(state: ConnectionState, reason?: EndReason): void;
}

/** Schedule runs fn after ms and returns what cancels it (setTimeout, in the page). */
export type Schedule = (fn: () => void, ms: number) => () => void;

export interface ConnectionOptions {
  /** url is the terminal's WebSocket. */
  url: string;
  /** exists asks the server whether the terminal exists (false on a 404); it throws when the
   * server does not answer, and the connection then tries again later. */
  exists: () => Promise<boolean>;
  openSocket?: (url: string) => Socket;
  /** delay is how long to wait before the attempt-th reconnection (0, 1, ...). */
  delay?: (attempt: number) => number;
  schedule?: Schedule;
}

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 30000;

/** reconnectDelay doubles from 250 ms to at most 30 s, and takes a random point in the upper
 * half of that, so that the pages of many users do not all come back at once after a restart
 * of the server. */
export function reconnectDelay(attempt: number, random = Math.random()): number {
  const ceiling = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** Math.min(attempt, 20));
  return Math.round(ceiling / 2 + (random * ceiling) / 2);
}

/** Frame is a frame of terminado's protocol that the page acts on. */
export type Frame = { kind: 'setup' } | { kind: 'stdout'; text: string } | { kind: 'disconnect' };

/** parseFrame reads a frame from the server; undefined for anything else (a binary message,
 * text that is not a JSON array, a kind the page does not know). */
export function parseFrame(data: unknown): Frame | undefined {
  if (typeof data !== 'string') {
    return undefined;
  }
  let msg: unknown;
  try {
    msg = JSON.parse(data);
  } catch {
    return undefined;
  }
  if (!Array.isArray(msg)) {
    return undefined;
  }
  const [kind, text] = msg as unknown[];
  switch (kind) {
    case 'setup':
      return { kind: 'setup' };
    case 'stdout':
      return typeof text === 'string' ? { kind: 'stdout', text } : undefined;
    case 'disconnect':
      return { kind: 'disconnect' };
  }
  return undefined;
}

export class TerminalConnection {
  private socket: Socket | null = null;
  private current: ConnectionState = 'connecting';
  private everConnected = false;
  private attempt = 0;
  private cancelTimer: (() => void) | undefined;
  private size: { rows: number; cols: number } | undefined;
  private sentSize = '';
  private disposed = false;
  private readonly openSocket: (url: string) => Socket;
  private readonly delay: (attempt: number) => number;
  private readonly schedule: Schedule;

  constructor(
    private readonly options: ConnectionOptions,
    private readonly events: ConnectionEvents,
  ) {
    this.openSocket = options.openSocket ?? ((url) => new WebSocket(url));
    this.delay = options.delay ?? ((n) => reconnectDelay(n));
    this.schedule =
      options.schedule ??
      ((fn, ms) => {
        const t = setTimeout(fn, ms);
        return () => clearTimeout(t);
      });
  }

  get state(): ConnectionState {
    return this.current;
  }

  /** start opens the socket. */
  start(): void {
    this.setState('connecting');
    this.open();
  }

  /** send types text into the terminal; false when not connected (the keys are not sent: the
   * page does not take them then). */
  send(text: string): boolean {
    if (this.current !== 'connected' || !this.socket || text === '') {
      return false;
    }
    this.socket.send(JSON.stringify(['stdin', text]));
    return true;
  }

  /** resize tells the server the terminal's size (the pty is sized to its smallest client);
   * only a change is sent, and every new connection is told once. */
  resize(rows: number, cols: number): void {
    if (!(rows >= 1 && cols >= 1)) {
      return;
    }
    this.size = { rows: Math.floor(rows), cols: Math.floor(cols) };
    this.sendSize();
  }

  /** dispose closes the socket and stops reconnecting (the page is going away). */
  dispose(): void {
    this.disposed = true;
    this.cancelTimer?.();
    this.drop(1000);
  }

  private sendSize(): void {
    if (this.current !== 'connected' || !this.socket || !this.size) {
      return;
    }
    const frame = JSON.stringify(['set_size', this.size.rows, this.size.cols]);
    if (frame !== this.sentSize) {
      this.socket.send(frame);
      this.sentSize = frame;
    }
  }

  private open(): void {
    const ws = this.openSocket(this.options.url);
    this.socket = ws;
    ws.onmessage = (ev) => this.receive(parseFrame(ev.data));
    // An error is followed by a close, which decides what comes next.
    ws.onerror = () => undefined;
    ws.onclose = () => {
      if (this.socket === ws) {
        this.socket = null;
        void this.lost();
      }
    };
  }

  private receive(frame: Frame | undefined): void {
    if (!frame || this.over()) {
      return;
    }
    switch (frame.kind) {
      case 'setup':
        this.attempt = 0;
        this.everConnected = true;
        this.sentSize = '';
        this.events.setup();
        this.setState('connected');
        this.sendSize();
        break;
      case 'stdout':
        this.events.output(frame.text);
        break;
      case 'disconnect':
        this.drop(1000);
        this.end('exited');
        break;
    }
  }

  /** lost handles a socket that closed: the terminal is asked for, and opened again unless
   * it is gone. */
  private async lost(): Promise<void> {
    if (this.over()) {
      return;
    }
    this.setState(this.everConnected ? 'reconnecting' : 'connecting');
    let exists: boolean | undefined;
    try {
      exists = await this.options.exists();
    } catch {
      exists = undefined; // the server does not answer: try again later
    }
    if (this.over()) {
      return;
    }
    if (exists === false) {
      this.end('gone');
      return;
    }
    const wait = this.delay(this.attempt++);
    this.cancelTimer = this.schedule(() => {
      this.cancelTimer = undefined;
      if (!this.over()) {
        this.open();
      }
    }, wait);
  }

  /** over says the connection is done with: the terminal ended, or the page went. */
  private over(): boolean {
    return this.disposed || this.current === 'ended';
  }

  private end(reason: EndReason): void {
    this.cancelTimer?.();
    this.setState('ended', reason);
  }

  /** drop closes the socket without hearing of it. */
  private drop(code: number): void {
    const ws = this.socket;
    this.socket = null;
    if (ws) {
      ws.onopen = null;
      ws.onmessage = null;
      ws.onclose = null;
      ws.onerror = null;
      ws.close(code);
    }
  }

  private setState(s: ConnectionState, reason?: EndReason): void {
    if (s !== this.current) {
      this.current = s;
      this.events.state(s, reason);
    }
  }
}
