// The selected cells: a range from an anchor (where the selection began) to the cursor cell
// (the one keys act on, shown as selected), as Notebook 6 selects with Shift-Up/Down and
// Shift-click.

export class CellSelection {
  /** The cell the range began at. */
  anchor = 0;
  /** The cursor cell: the one selected, that edit mode and single-cell commands act on. */
  head = 0;

  /** set selects one cell. */
  set(i: number): void {
    this.anchor = i;
    this.head = i;
  }

  /** extendTo moves the cursor to i and keeps the anchor. */
  extendTo(i: number): void {
    this.head = i;
  }

  /** from and to are the first and last selected indices. */
  get from(): number {
    return Math.min(this.anchor, this.head);
  }

  get to(): number {
    return Math.max(this.anchor, this.head);
  }

  get count(): number {
    return this.to - this.from + 1;
  }

  has(i: number): boolean {
    return i >= this.from && i <= this.to;
  }

  /** clamp keeps both ends among n cells. */
  clamp(n: number): void {
    const last = Math.max(0, n - 1);
    this.anchor = Math.max(0, Math.min(last, this.anchor));
    this.head = Math.max(0, Math.min(last, this.head));
  }
}
