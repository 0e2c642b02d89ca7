// The page's one place for errors: a role=alert area that says what the server said.
import { ServerConnection } from '@jupyterlab/services';
import { h } from '../shell/dom';

/** errorText is what to tell the user about an error: Jupyter's message when the server sent
 * one, else the HTTP status, else the error's own message. */
export function errorText(err: unknown): string {
  if (err instanceof ServerConnection.ResponseError) {
    const r = err.response;
    const generic = ['', 'forbidden', 'unauthorized'].includes(err.message.trim().toLowerCase());
    if ((r.status === 401 || r.status === 403) && generic) {
      // What a server restarted with a new token, or an expired login, answers.
      return 'The server does not know you (any more): reload the page to log in again.';
    }
    if (err.message && !err.message.startsWith('Invalid response:')) {
      return err.message;
    }
    return `The server answered ${r.status}${r.statusText ? ' ' + r.statusText : ''}.`;
  }
  if (err instanceof ServerConnection.NetworkError) {
    return 'The server cannot be reached: ' + err.message;
  }
  if (err instanceof Error) {
    return err.message || String(err);
  }
  return String(err);
}

/** Alerts shows one error at a time, until dismissed or replaced. Errors from polling are
 * keyed by their source and go away by themselves when that source answers again. */
export class Alerts {
  readonly element: HTMLElement;
  private readonly text: HTMLElement;
  private source: string | undefined;

  constructor() {
    this.text = h('span', { class: 'nb-alert-text' });
    const dismiss = h('button', { type: 'button', class: 'nb-alert-dismiss' }, 'Dismiss');
    dismiss.addEventListener('click', () => this.clear());
    // The role=alert element is in the page from the start, so that what appears in it is read.
    this.element = h('div', { class: 'nb-alert', role: 'alert', hidden: true }, this.text, ' ', dismiss);
  }

  /** show tells of an error (a message, or an error to explain); source names where it came
   * from for clearing it later ('' for actions: those stay until dismissed). */
  show(what: unknown, context = '', source = ''): void {
    const msg = errorText(what);
    const text = context ? `${context}: ${msg}` : msg;
    // Polling says the same again every few seconds, and a server that is down fails every
    // poll: keep the first message rather than make screen readers repeat or flip it.
    if (source !== '' && this.source !== undefined && this.source !== '' && !this.element.hidden) {
      if (this.source !== source || this.text.textContent === text) {
        return;
      }
    }
    this.source = source;
    this.text.textContent = text;
    this.element.hidden = false;
  }

  /** ok clears the error a source showed, once that source works again. */
  ok(source: string): void {
    if (this.source === source && source !== '') {
      this.clear();
    }
  }

  clear(): void {
    this.element.hidden = true;
    this.text.textContent = '';
    this.source = undefined;
  }
}
