// Editors made as cells come into view, so that a long notebook shows at once.
import type { CellView } from './cellview';
import { editorModule } from './editorloader';

/** LazyEditors makes the editors of cells as they come into view, a few per frame, so that
 * the page shows a long notebook at once and the editors follow; then, when the browser is
 * idle, the editors of the cells out of view too (so that every cell has its editor soon). */
export class LazyEditors {
  private io: IntersectionObserver | null = null;
  private queue: CellView[] = [];
  private scheduled = false;
  private byNode = new Map<Element, CellView>();
  private sweep = 0;

  constructor(private all: () => CellView[]) {
    if (typeof IntersectionObserver === 'function') {
      this.io = new IntersectionObserver(
        (entries) => {
          for (const e of entries) {
            const v = this.byNode.get(e.target);
            if (e.isIntersecting && v) {
              this.queue.push(v);
              this.io?.unobserve(e.target);
            }
          }
          this.kick();
        },
        { rootMargin: '400px' },
      );
    }
  }

  observe(v: CellView): void {
    this.sweep = 0;
    if (!this.io || v.cell.type === 'markdown') return;
    this.byNode.set(v.node, v);
    this.io.observe(v.node);
    this.kick();
  }

  unobserve(v: CellView): void {
    this.byNode.delete(v.node);
    this.io?.unobserve(v.node);
  }

  private next(): CellView | undefined {
    const v = this.queue.shift();
    if (v) return v;
    const all = this.all();
    while (this.sweep < all.length) {
      const w = all[this.sweep++];
      if (w.cell.type !== 'markdown' && !w.hasEditor) return w;
    }
    return undefined;
  }

  kick(): void {
    if (this.scheduled || !editorModule()) return;
    this.scheduled = true;
    const run = (deadline?: { timeRemaining(): number }) => {
      this.scheduled = false;
      const until = performance.now() + Math.max(4, Math.min(12, deadline ? deadline.timeRemaining() : 8));
      let v: CellView | undefined;
      let more = false;
      while (performance.now() < until) {
        v = this.next();
        if (!v) break;
        more = true;
        if (v.node.isConnected && v.cell.type !== 'markdown') {
          this.unobserve(v);
          v.ensureEditor();
        }
      }
      if (more) this.kick();
    };
    const ric = (
      window as unknown as {
        requestIdleCallback?: (f: (d: { timeRemaining(): number }) => void, o?: { timeout: number }) => void;
      }
    ).requestIdleCallback;
    if (ric) ric(run, { timeout: 500 });
    else setTimeout(run, 16);
  }
}
