// ANSI escape sequences (SGR colours, bold, ...) to HTML, via ansi_up, which escapes the text.
// Colours of the 16-colour palette become classes (ansi-red-fg, ansi-bright-blue-bg, ...,
// styled in render.css); bold, italic, underline and 256/true colours are inline styles
// (style-src allows them).
import { AnsiUp } from 'ansi_up';
import { sanitizeAnsi } from './sanitize';

/** newAnsi is a converter; it keeps the SGR state and an unfinished escape between calls. */
export function newAnsi(): AnsiUp {
  const a = new AnsiUp();
  a.use_classes = true;
  return a;
}

/** ansiFragment converts text with one converter, so state carries on to the next call. */
export function ansiFragment(a: AnsiUp, text: string): DocumentFragment {
  const html = a.ansi_to_html(text);
  // Plain text (the common case) needs no parsing.
  if (html.indexOf('<') < 0 && html.indexOf('&') < 0) {
    const f = document.createDocumentFragment();
    f.append(html);
    return f;
  }
  return sanitizeAnsi(html);
}

/** ansiToFragment converts one whole text (a traceback, a text/plain output). */
export function ansiToFragment(text: string): DocumentFragment {
  return ansiFragment(newAnsi(), text);
}
