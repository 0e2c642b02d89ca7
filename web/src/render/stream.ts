// Stream text as a terminal shows it: '\n' ends a line, '\r' returns to the start of the
// line and later text overwrites it character by character ("\r\n" is therefore a newline),
// '\b' steps back one character (spinners: "|\b/\b-"), ANSI SGR codes colour it. Text arrives
// in chunks; each chunk is converted once and appended, so a stream of many thousands of lines
// stays cheap. Only the last, unfinished line is kept apart (a <span class="nb-line">), because
// a '\r' may rewrite it.
//
// The ansi_up converter lives with the element: colours, and an escape split between two
// chunks, carry on from one chunk to the next.
import type { AnsiUp } from 'ansi_up';
import { ansiFragment, newAnsi } from './ansi';

interface StreamState {
  ansi: AnsiUp;
  /** The unfinished last line. Its children are flat: text nodes and elements holding text. */
  line: HTMLElement;
  /** Where the next text is written in the line, in characters; null at its end. */
  cursor: number | null;
}

const states = new WeakMap<HTMLElement, StreamState>();

function newLine(el: HTMLElement): HTMLElement {
  const line = document.createElement('span');
  line.className = 'nb-line';
  el.append(line);
  return line;
}

function stateOf(el: HTMLElement): StreamState {
  let s = states.get(el);
  if (!s) {
    s = { ansi: newAnsi(), line: newLine(el), cursor: null };
    states.set(el, s);
  }
  return s;
}

/** writeStream adds text to an element made for terminal text (a <pre>). */
export function writeStream(el: HTMLElement, text: string): void {
  if (text === '') {
    return;
  }
  const s = stateOf(el);
  // The common case: no carriage return, writing at the end of the line. One conversion for
  // the whole chunk; the finished lines go into the current line's element, which is then
  // left behind, and the rest starts a new one.
  if (s.cursor === null && text.indexOf('\r') < 0 && text.indexOf('\b') < 0) {
    const nl = text.lastIndexOf('\n');
    if (nl < 0) {
      s.line.append(ansiFragment(s.ansi, text));
      return;
    }
    s.line.append(ansiFragment(s.ansi, text.slice(0, nl + 1)));
    s.line = newLine(el);
    if (nl + 1 < text.length) {
      s.line.append(ansiFragment(s.ansi, text.slice(nl + 1)));
    }
    return;
  }
  // eslint-disable-next-line no-control-regex -- the backspace is meant: it steps back, as in a terminal.
  for (const part of text.split(/(\r|\n|\x08)/)) {
    if (part === '\n') {
      s.line.append('\n');
      s.line = newLine(el);
      s.cursor = null;
    } else if (part === '\r') {
      s.cursor = 0;
    } else if (part === '\b') {
      s.cursor = Math.max(0, (s.cursor ?? s.line.textContent?.length ?? 0) - 1);
    } else if (part !== '') {
      write(s, ansiFragment(s.ansi, part));
    }
  }
}

/** write puts converted text at the line's cursor, overwriting what is there. */
function write(s: StreamState, frag: DocumentFragment): void {
  if (s.cursor === null) {
    s.line.append(frag);
    return;
  }
  const n = frag.textContent?.length ?? 0;
  const from = splitAt(s.line, s.cursor);
  const to = splitAt(s.line, s.cursor + n);
  for (let c = from; c && c !== to;) {
    const next: ChildNode | null = c.nextSibling;
    c.remove();
    c = next;
  }
  s.line.insertBefore(frag, to);
  s.cursor = to === null ? null : s.cursor + n;
}

/** splitAt splits the line's child holding character col in two, and returns the child that
 * starts at col (null: col is at or past the end). */
function splitAt(line: HTMLElement, col: number): ChildNode | null {
  let pos = 0;
  for (let c = line.firstChild; c; c = c.nextSibling) {
    const len = c.textContent?.length ?? 0;
    if (col === pos) {
      return c;
    }
    if (col < pos + len) {
      const k = col - pos;
      const text = c.textContent ?? '';
      const rest = c.cloneNode(false) as ChildNode;
      rest.textContent = text.slice(k);
      c.textContent = text.slice(0, k);
      c.after(rest);
      return rest;
    }
    pos += len;
  }
  return null;
}
