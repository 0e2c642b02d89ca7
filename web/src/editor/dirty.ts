// Whether the text differs from the file as last loaded or saved: every change counts one
// version; a save records the version it wrote, so that typing during the save keeps the page
// dirty.

export class DirtyTracker {
  private version = 0;
  private savedVersion = 0;
  private listeners: ((dirty: boolean) => void)[] = [];

  get dirty(): boolean {
    return this.version !== this.savedVersion;
  }

  /** onChange calls f with the dirty state each time it changes. */
  onChange(f: (dirty: boolean) => void): void {
    this.listeners.push(f);
  }

  /** changed counts a change of the text. */
  changed(): void {
    this.set(() => this.version++);
  }

  /** current is the version of the text now: what a save about to start writes. */
  current(): number {
    return this.version;
  }

  /** saved says the file holds the text of version v (a save of it succeeded). */
  saved(v: number): void {
    this.set(() => (this.savedVersion = Math.max(this.savedVersion, v)));
  }

  /** loaded says the text is the file's as just loaded. */
  loaded(): void {
    this.set(() => (this.savedVersion = this.version));
  }

  private set(change: () => void): void {
    const before = this.dirty;
    change();
    if (this.dirty !== before) {
      for (const f of this.listeners) {
        f(this.dirty);
      }
    }
  }
}
