// Math: TeX to KaTeX's HTML and MathML. Markdown must not see the math (it would take the _
// and * of x_1*y_2 for emphasis), so, as Jupyter does, the math spans are taken out of the
// source first, the markdown is rendered, and the rendered math is put back.
import katex from 'katex';

/** texToHTML renders TeX with KaTeX; a TeX error is shown in place, never thrown. */
export function texToHTML(tex: string, display: boolean): string {
  return katex.renderToString(tex, {
    displayMode: display,
    throwOnError: false,
    output: 'htmlAndMathml',
    trust: false,
    strict: 'ignore',
  });
}

/** stripDelimiters takes the $$...$$, $...$, \[...\] or \(...\) from around a text/latex output. */
export function stripDelimiters(tex: string): string {
  const t = tex.trim();
  for (const [open, close] of [
    ['$$', '$$'],
    ['\\[', '\\]'],
    ['\\(', '\\)'],
    ['$', '$'],
  ]) {
    if (t.length >= open.length + close.length && t.startsWith(open) && t.endsWith(close)) {
      return t.slice(open.length, t.length - close.length);
    }
  }
  return t;
}

export interface MathSpan {
  tex: string;
  display: boolean;
}

// Placeholders are private-use characters: markdown leaves them alone and no notebook types them.
const OPEN = '\uE000';
const CLOSE = '\uE001';
const PLACEHOLDER = /\uE000(\d+)\uE001/g;

/** removeMath replaces the math in markdown source with placeholders, leaving code spans and
 * fenced code blocks (where a $ is just a dollar) and escaped \$ alone. */
export function removeMath(src: string): { text: string; math: MathSpan[] } {
  const math: MathSpan[] = [];
  let out = '';
  let i = 0;
  const n = src.length;
  const put = (tex: string, display: boolean) => {
    out += OPEN + math.length + CLOSE;
    math.push({ tex, display });
  };
  src = src.replace(/[\uE000\uE001]/g, '');
  while (i < n) {
    const ch = src[i];
    const atLineStart = i === 0 || src[i - 1] === '\n';
    // A fenced code block: verbatim up to its closing fence (or the end).
    if (atLineStart) {
      const fence = /^ {0,3}(`{3,}|~{3,})/.exec(src.slice(i, i + 64));
      if (fence) {
        const mark = fence[1];
        const close = new RegExp(
          '\\n {0,3}' + (mark[0] === '`' ? '`' : '~') + '{' + mark.length + ',}[ \\t]*(?=\\n|$)',
          'g',
        );
        close.lastIndex = i + fence[0].length;
        const m = close.exec(src);
        const end = m ? m.index + m[0].length : n;
        out += src.slice(i, end);
        i = end;
        continue;
      }
    }
    if (ch === '`') {
      // A code span: a run of backticks up to the next run of the same length.
      let j = i;
      while (j < n && src[j] === '`') j++;
      const run = src.slice(i, j);
      // The closing run: the next run of backticks of exactly the same length, in the same
      // paragraph (a code span never crosses a blank line).
      const blank = /\n[ \t]*\n/g;
      blank.lastIndex = j;
      const paragraphEnd = blank.exec(src)?.index ?? n;
      const runs = /`+/g;
      runs.lastIndex = j;
      let m: RegExpExecArray | null;
      while ((m = runs.exec(src)) && m[0].length !== run.length) {
        // A longer or shorter run is part of the span.
      }
      if (m && m.index < paragraphEnd) {
        out += src.slice(i, m.index + run.length);
        i = m.index + run.length;
      } else {
        out += run;
        i = j;
      }
      continue;
    }
    if (ch === '\\') {
      const next = src[i + 1];
      if (next === '[' || next === '(') {
        const closer = next === '[' ? '\\]' : '\\)';
        const end = src.indexOf(closer, i + 2);
        if (end >= 0) {
          put(src.slice(i + 2, end), next === '[');
          i = end + 2;
          continue;
        }
      }
      const env = /^\\begin\{([a-zA-Z]+\*?)\}/.exec(src.slice(i, i + 40));
      if (env) {
        const endTag = '\\end{' + env[1] + '}';
        const end = src.indexOf(endTag, i);
        if (end >= 0) {
          put(src.slice(i, end + endTag.length), true);
          i = end + endTag.length;
          continue;
        }
      }
      // An escape (\$ among them): both characters as they are, for markdown to unescape.
      out += src.slice(i, i + 2);
      i += 2;
      continue;
    }
    if (ch === '$') {
      const display = src[i + 1] === '$';
      const start = i + (display ? 2 : 1);
      const end = findClosingDollar(src, start, display);
      if (end >= 0 && end > start) {
        put(src.slice(start, end), display);
        i = end + (display ? 2 : 1);
        continue;
      }
      out += display ? '$$' : '$';
      i = start;
      continue;
    }
    out += ch;
    i++;
  }
  return { text: out, math };
}

/** findClosingDollar is where the $ (or $$) closing math begun at start is, or -1. Inline math
 * does not cross a blank line. */
function findClosingDollar(src: string, start: number, display: boolean): number {
  for (let k = start; k < src.length; k++) {
    const c = src[k];
    if (c === '\\') {
      k++;
      continue;
    }
    if (!display && c === '\n' && src[k + 1] === '\n') {
      return -1;
    }
    if (c === '$') {
      if (!display) {
        return k;
      }
      if (src[k + 1] === '$') {
        return k;
      }
    }
  }
  return -1;
}

/** replaceMath puts the rendered math back in place of the placeholders. */
export function replaceMath(html: string, math: MathSpan[]): string {
  return html.replace(PLACEHOLDER, (whole, k: string) => {
    const m = math[Number(k)];
    return m ? texToHTML(m.tex, m.display) : whole;
  });
}
