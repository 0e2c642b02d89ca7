// The notebook's own parts of saving: its file name, and autosave. Loading and saving any
// file, a notebook's included, is shell/saver.ts's.

/** withIpynb adds ".ipynb" to a name that has no extension of it. */
export function withIpynb(name: string): string {
  return name.toLowerCase().endsWith('.ipynb') ? name : name + '.ipynb';
}

/** Autosave calls save every interval while the notebook is dirty. */
export class Autosave {
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private isDirty: () => boolean,
    private save: () => Promise<unknown>,
    private intervalMs = 120000,
  ) {}

  start(): void {
    this.stop();
    this.timer = setInterval(() => {
      if (this.isDirty()) {
        void this.save();
      }
    }, this.intervalMs);
  }

  stop(): void {
    if (this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
