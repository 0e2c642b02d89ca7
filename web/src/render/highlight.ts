// Static syntax highlighting (the print view, and anywhere a cell is shown read-only): the
// Lezer parser CodeMirror uses for Python, with @lezer/highlight's classHighlighter, so the
// spans carry tok-* classes styled in render.css. Other languages are plain text.
import { pythonLanguage } from '@codemirror/lang-python';
import { classHighlighter, highlightCode as lezerHighlight } from '@lezer/highlight';
import { h } from '../shell/dom';

/** isPython says whether a notebook's language name is Python (python, python3, ipython3). */
export function isPython(language: string): boolean {
  return /^i?python\d*$/i.test(language.trim());
}

/** highlightCode is source as <pre class="nb-code"><code> with highlighted spans. */
export function highlightCode(source: string, language: string): HTMLElement {
  const code = h('code', { 'data-language': language || undefined });
  const pre = h('pre', { class: 'nb-code' }, code);
  if (!isPython(language)) {
    code.append(source);
    return pre;
  }
  const tree = pythonLanguage.parser.parse(source);
  lezerHighlight(
    source,
    tree,
    classHighlighter,
    (text, classes) => {
      code.append(classes ? h('span', { class: classes }, text) : text);
    },
    () => code.append('\n'),
  );
  return pre;
}
