// The signals a page gives when it is ready, for the browser tests and the page budgets of
// make bench: document.body.dataset.ready and a performance mark each.

/** markRendered says the page shows its content and takes input (before slow things such as a
 * kernel start): performance mark nbkube-rendered-<kind>. */
export function markRendered(kind: string): void {
  performance.mark(`nbkube-rendered-${kind}`);
}

/** markReady says the page is fully ready as kind: document.body.dataset.ready = kind, and
 * performance mark nbkube-ready-<kind> (and the rendered mark, if the page gave none). */
export function markReady(kind: string): void {
  if (performance.getEntriesByName(`nbkube-rendered-${kind}`).length === 0) {
    markRendered(kind);
  }
  performance.mark(`nbkube-ready-${kind}`);
  document.body.dataset.ready = kind;
}
