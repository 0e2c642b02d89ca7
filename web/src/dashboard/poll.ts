// Polling: a task run every few seconds while the page is seen, at once when it is seen again,
// and at once on refresh() (after each action); runs never overlap, and refreshes asked for
// during a run make one more run after it.

export class Poller {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private inflight: Promise<void> | undefined;
  private next: Promise<void> | undefined;
  private started = false;

  constructor(
    private readonly task: () => Promise<void>,
    private readonly interval = 5000,
    private readonly doc: Pick<Document, 'hidden' | 'addEventListener'> = document,
  ) {}

  /** start runs the task now and then every interval; it listens for the page being hidden. */
  start(): Promise<void> {
    if (!this.started) {
      this.started = true;
      this.doc.addEventListener('visibilitychange', () => {
        if (this.doc.hidden) {
          this.cancel();
        } else {
          void this.refresh();
        }
      });
    }
    return this.refresh();
  }

  /** refresh runs the task as soon as it can; the promise resolves when that run is done. */
  refresh(): Promise<void> {
    this.cancel();
    if (this.inflight) {
      this.next ??= this.inflight.then(() => {
        this.next = undefined;
        return this.refresh();
      });
      return this.next;
    }
    const run = (async () => {
      try {
        await this.task();
      } catch {
        // The task reports its own errors; polling goes on.
      }
    })();
    this.inflight = run.finally(() => {
      this.inflight = undefined;
      this.schedule();
    });
    return this.inflight;
  }

  private schedule(): void {
    this.cancel();
    if (this.started && !this.doc.hidden && !this.next) {
      this.timer = setTimeout(() => void this.refresh(), this.interval);
    }
  }

  private cancel(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }
}
