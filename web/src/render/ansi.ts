// ANSI escape sequences (SGR colours, bold, ...) to DOM, via ansi_up, which escapes the text.
// Colours of the 16-colour palette become classes (ansi-red-fg, ansi-bright-blue-bg, ...,
// styled in render.css); bold, italic, underline and 256/true colours are inline styles
// (style-src allows them).
//
// ansi_up's output is a closed little grammar (escaped text, <span style class>, <a href> for
// OSC 8 links), so it is read back into nodes here rather than parsed as HTML: no markup from
// a stream ever reaches innerHTML, and a stream of many chunks costs no HTML parser per chunk.
import { AnsiUp } from 'ansi_up';

/** newAnsi is a converter; it keeps the SGR state and an unfinished escape between calls. */
export function newAnsi(): AnsiUp {
  const a = new AnsiUp();
  a.use_classes = true;
  return a;
}

const ENTITIES: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#x27;': "'" };

function unescape(s: string): string {
  return s.indexOf('&') < 0 ? s : s.replace(/&(?:amp|lt|gt|quot|#x27);/g, (e) => ENTITIES[e]);
}

const TOKEN =
  /<span(?: style="([^"<>]*)")?(?: class="([^"<>]*)")?>([^<]*)<\/span>|<a href="([^"<>]*)">([^<]*)<\/a>|([^<]+)|(<)/g;

/** ansiFragment converts text with one converter, so state carries on to the next call. */
export function ansiFragment(a: AnsiUp, text: string): DocumentFragment {
  const html = a.ansi_to_html(text);
  const f = document.createDocumentFragment();
  if (html.indexOf('<') < 0) {
    f.append(unescape(html));
    return f;
  }
  for (const m of html.matchAll(TOKEN)) {
    if (m[3] !== undefined) {
      const span = document.createElement('span');
      if (m[1]) span.setAttribute('style', unescape(m[1]));
      if (m[2]) span.className = m[2];
      span.textContent = unescape(m[3]);
      f.append(span);
    } else if (m[5] !== undefined) {
      const href = unescape(m[4]);
      if (/^https?:/i.test(href)) {
        const link = document.createElement('a');
        link.href = href;
        link.target = '_blank';
        link.rel = 'noopener noreferrer';
        link.textContent = unescape(m[5]);
        f.append(link);
      } else {
        f.append(unescape(m[5]));
      }
    } else {
      f.append(unescape(m[6] ?? m[7]));
    }
  }
  return f;
}

/** ansiToFragment converts one whole text (a traceback, a text/plain output). */
export function ansiToFragment(text: string): DocumentFragment {
  return ansiFragment(newAnsi(), text);
}
