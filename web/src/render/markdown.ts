// Markdown (cells and text/markdown outputs): marked, with math by KaTeX, sanitised.
import { Marked } from 'marked';
import { removeMath, replaceMath } from './math';

let parser: Marked | undefined;

function marked(): Marked {
  parser ??= new Marked({ gfm: true, breaks: false, async: false });
  return parser;
}

/** markdownToHTML renders markdown with math to HTML, not yet sanitised. */
export function markdownToHTML(source: string): string {
  const { text, math } = removeMath(source);
  const html = marked().parse(text, { async: false });
  return replaceMath(html, math);
}
