// The terminal's page (/terminals/<name>, Notebook 6's address): xterm.js fitted to the
// window, connected to the terminal's WebSocket, reconnected while the terminal exists.
import '../shell/base.css';
import '@xterm/xterm/css/xterm.css';
import './terminal.css';
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import { config } from '../shell/config';
import { terminalExists, terminalSocketURL } from '../shell/terminals';
import { TerminalConnection } from './connection';
import { TerminalPage } from './view';

const c = config();
const name = c.terminal ?? '';
const term = new Terminal({
  fontFamily: "ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace",
  fontSize: 14,
  // Rows a little apart: at 1.0, DejaVu Sans Mono's "_" falls below its row and is cut off.
  lineHeight: 1.15,
  cursorBlink: true,
  scrollback: 5000,
  disableStdin: true,
});
const page = new TerminalPage(name, term);
document.body.classList.add('nb-terminal-page');
document.body.append(page.header, page.main);

const fit = new FitAddon();
term.loadAddon(fit);
term.open(page.screen);
fit.fit();
// The terminal takes what the window leaves below the header, whenever either changes;
// xterm.js then reports the new size, which goes to the server as set_size.
new ResizeObserver(() => fit.fit()).observe(page.screen);

if (c.terminalsAvailable) {
  const conn = new TerminalConnection(
    { url: terminalSocketURL(name), exists: () => terminalExists(name) },
    page.events,
  );
  page.attach(conn);
  conn.start();
  term.focus();
} else {
  page.unavailable();
}
