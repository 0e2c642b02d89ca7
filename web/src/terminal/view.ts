// The terminal page's parts around xterm.js: the header with the connection's state, the
// notice when the terminal has ended, and the wiring of the terminal's keys, size and output
// to the connection.
import type { Terminal } from '@xterm/xterm';
import { treeURL } from '../shell/config';
import { h } from '../shell/dom';
import { header, setTitle } from '../shell/header';
import { markReady } from '../shell/ready';
import type { ConnectionEvents, ConnectionState, EndReason } from './connection';

/** TermLike is what the page uses of an xterm.js Terminal. */
export type TermLike = Pick<
  Terminal,
  | 'write'
  | 'reset'
  | 'onData'
  | 'onResize'
  | 'rows'
  | 'cols'
  | 'options'
  | 'attachCustomKeyEventHandler'
  | 'hasSelection'
>;

/** Connection is what the page uses of a TerminalConnection. */
export interface Connection {
  send(text: string): boolean;
  resize(rows: number, cols: number): void;
}

type Key = Pick<KeyboardEvent, 'key' | 'ctrlKey' | 'metaKey' | 'altKey' | 'shiftKey'>;

/** terminalTakesKey says whether xterm.js is to handle a key, or leave it to the browser:
 * Ctrl-V (and Ctrl-Shift-V) paste, as in JupyterLab's terminal, where xterm.js would send the
 * shell a ^V; Ctrl-C copies when text is selected (and Ctrl-Shift-C always), else it is the
 * shell's interrupt. The browser's paste and copy events are then xterm.js's to handle: it
 * types what is pasted (bracketed, when the shell asked for it) and copies its selection. On
 * a Mac, Cmd-C and Cmd-V are xterm.js's own. */
export function terminalTakesKey(e: Key, hasSelection: boolean): boolean {
  if (!e.ctrlKey || e.altKey || e.metaKey) {
    return true;
  }
  switch (e.key.toLowerCase()) {
    case 'v':
      return false;
    case 'c':
      return !(e.shiftKey || hasSelection);
  }
  return true;
}

const stateText: Record<ConnectionState, string> = {
  connecting: 'Connecting…',
  connected: 'Connected',
  reconnecting: 'Reconnecting…',
  ended: 'Ended',
};

/** endedText is what the page says of a terminal that ended (or of a server that runs none:
 * 'off'); connected says whether this page was ever connected to it. */
export function endedText(name: string, reason: EndReason | 'off' | undefined, connected: boolean): string {
  if (reason === 'off') {
    return 'This server runs no terminals.';
  }
  if (reason === 'exited') {
    return `Terminal ${name} has ended: its shell exited.`;
  }
  if (connected) {
    return `Terminal ${name} has ended: it was shut down.`;
  }
  return `There is no terminal ${name}: it was shut down, or it never existed.`;
}

export class TerminalPage {
  readonly header: HTMLElement;
  readonly main: HTMLElement;
  /** screen is where xterm.js opens. */
  readonly screen: HTMLElement;
  readonly status: HTMLElement;
  readonly notice: HTMLElement;
  /** events are the connection's events, shown in this page and its terminal. */
  readonly events: ConnectionEvents;
  private connections = 0;
  private ready = false;

  constructor(
    private readonly name: string,
    private readonly term: TermLike,
  ) {
    const title = `Terminal ${name}`;
    this.status = h('span', { class: 'nb-terminal-state', role: 'status', 'aria-live': 'polite' });
    this.header = header(title, this.status);
    this.notice = h('div', { class: 'nb-terminal-notice', role: 'alert' });
    this.notice.hidden = true;
    this.screen = h('div', { class: 'nb-terminal-screen' });
    this.main = h('main', { class: 'nb-terminal', 'aria-label': title }, this.notice, this.screen);
    setTitle(title);
    this.events = {
      output: (text) => this.term.write(text),
      setup: () => {
        this.connections++;
        document.body.dataset.terminalConnections = String(this.connections);
        this.term.reset();
      },
      state: (s, reason) => this.show(s, reason),
    };
    this.show('connecting');
  }

  /** attach sends the terminal's keys and size to conn. */
  attach(conn: Connection): void {
    this.term.attachCustomKeyEventHandler((e) => terminalTakesKey(e, this.term.hasSelection()));
    this.term.onData((text) => conn.send(text));
    this.term.onResize(({ rows, cols }) => conn.resize(rows, cols));
    conn.resize(this.term.rows, this.term.cols);
  }

  /** unavailable says the server runs no terminals (the page then never connects). */
  unavailable(): void {
    this.show('ended', 'off');
  }

  private show(s: ConnectionState, reason?: EndReason | 'off'): void {
    // Keys go nowhere while there is no connection: none are kept to be sent later, when
    // they might land in another program.
    this.term.options.disableStdin = s !== 'connected';
    this.status.textContent = stateText[s];
    this.status.dataset.state = s;
    document.body.dataset.terminalState = s;
    if (s === 'ended') {
      this.notice.replaceChildren(
        h('p', {}, endedText(this.name, reason, this.connections > 0)),
        h('a', { href: treeURL(''), class: 'nb-terminal-back' }, 'Back to the dashboard'),
      );
      this.notice.hidden = false;
    }
    if (!this.ready && (s === 'connected' || s === 'ended')) {
      this.ready = true;
      markReady('terminal');
    }
  }
}
