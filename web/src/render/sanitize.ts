// Sanitising: every piece of markup from a notebook (HTML and SVG outputs, rendered markdown
// and math) reaches the page only through DOMPurify, trusted notebook or not. (ansi_up's output
// is read back into nodes in ansi.ts, never parsed as HTML.)
//
// Scripts never run in the page: DOMPurify drops <script>, on* handlers and javascript: URLs,
// and the pages' Content-Security-Policy (script-src 'self') refuses inline scripts anyway.
// Outputs that need JavaScript (HTML with a <script>, application/javascript, Plotly figures)
// never come here: they run in a sandboxed frame of their own (frame.ts).
// The one difference trust makes: a trusted notebook's HTML may carry <style> (pandas' tables),
// an untrusted one's may not, nor forms.
import DOMPurify, { type Config, type DOMPurify as Purifier } from 'dompurify';

let purifier: Purifier | undefined;

/** purify is DOMPurify bound to the page's window (made lazily: modules load before a test's DOM). */
function purify(): Purifier {
  if (!purifier) {
    purifier = DOMPurify(window);
    purifier.addHook('afterSanitizeAttributes', (node) => {
      // Links from outputs open in a new tab and never get a handle on this page.
      if (node.tagName === 'A' && node.hasAttribute('href')) {
        node.setAttribute('target', '_blank');
        node.setAttribute('rel', 'noopener noreferrer');
      }
    });
  }
  return purifier;
}

function fragment(html: string, cfg: Config): DocumentFragment {
  return purify().sanitize(html, { ...cfg, RETURN_DOM_FRAGMENT: true });
}

// DOMPurify's own list of URL schemes, and attachment: (a markdown cell's attached image,
// which renderMarkdown then points at the attachment's data).
const ALLOWED_URI =
  /^(?:(?:(?:f|ht)tps?|mailto|tel|callto|sms|cid|xmpp|matrix|attachment):|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i;

const UNTRUSTED_FORBID = ['style', 'form', 'input', 'button', 'textarea', 'select'];

/** sanitizeHTML is an HTML output as a safe fragment. */
export function sanitizeHTML(html: string, trusted: boolean): DocumentFragment {
  return fragment(html, {
    FORBID_TAGS: trusted ? ['form'] : UNTRUSTED_FORBID,
    // Without it a leading <style> would be parsed into <head> and lost.
    FORCE_BODY: true,
    // KaTeX's MathML (in markdown) keeps its TeX in <annotation>; harmless text.
    ADD_TAGS: ['semantics', 'annotation'],
    ADD_ATTR: ['encoding'],
    ALLOWED_URI_REGEXP: ALLOWED_URI,
  });
}

/** sanitizeSVG is an SVG image as a safe fragment (SVG and its filters only). */
export function sanitizeSVG(svg: string): DocumentFragment {
  return fragment(svg, { USE_PROFILES: { svg: true, svgFilters: true } });
}
