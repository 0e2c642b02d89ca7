// The notebook's kernel commands that ask first or choose: restart (and run all), shut down,
// and change the kernel to another of the specs the user may start.
import { choose, alert, messageOf, pick } from '../shell/dialogs';
import type { NotebookPage } from './notebook';

export class KernelActions {
  constructor(private p: NotebookPage) {}

  private get kernel() {
    return this.p.kernel;
  }

  interrupt(): Promise<void> {
    return this.kernel.interrupt();
  }

  async restart(runAll: boolean): Promise<void> {
    const ok = await choose(
      runAll ? 'Restart and run all?' : 'Restart the kernel?',
      'The kernel’s variables will be lost.',
      [
        { value: 'cancel', label: 'Cancel' },
        { value: 'restart', label: runAll ? 'Restart and run all' : 'Restart', primary: true },
      ],
    );
    this.p.refocus();
    if (ok !== 'restart') {
      return;
    }
    if (!this.kernel.session) {
      await this.p.connectKernel();
    } else {
      try {
        await this.kernel.restart();
      } catch {
        // A kernel that is gone cannot restart: start a new one for the notebook instead.
        await this.kernel.shutdown().catch(() => undefined);
        await this.p.connectKernel();
      }
    }
    for (const v of this.p.views) {
      v.setRunning(null);
    }
    if (runAll) {
      await this.kernel.whenIdle(60000);
      await this.p.runCells(this.p.views.map((_, j) => j));
    }
  }

  async shutdown(): Promise<void> {
    const ok = await choose(
      'Shut down the kernel?',
      'The kernel’s variables will be lost; running a cell starts a new kernel.',
      [
        { value: 'cancel', label: 'Cancel' },
        { value: 'shutdown', label: 'Shut down', primary: true },
      ],
    );
    this.p.refocus();
    if (ok !== 'shutdown') return;
    try {
      await this.kernel.shutdown();
    } catch (err) {
      void alert('Shut down failed', messageOf(err));
    }
    for (const v of this.p.views) {
      v.setRunning(null);
    }
  }

  /** change asks for one of the kernel specs (GET /api/kernelspecs) and changes the
   * session's kernel to it (PATCH /api/sessions/<id>, as Notebook 6 does); the notebook's
   * kernelspec follows. */
  async change(): Promise<void> {
    const ks = this.p.manager.kernelspecs;
    let specs;
    try {
      await ks.refreshSpecs();
      specs = ks.specs;
    } catch (err) {
      void alert('Change kernel', 'The kernels could not be listed: ' + messageOf(err));
      return;
    }
    const current =
      this.kernel.kernel?.name ?? (this.p.model.metadata.kernelspec as { name?: string } | undefined)?.name;
    const items = Object.values(specs?.kernelspecs ?? {})
      .filter((s): s is NonNullable<typeof s> => !!s)
      .sort((a, b) => (a.name === current ? -1 : b.name === current ? 1 : a.display_name.localeCompare(b.display_name)))
      .map((s) => ({ value: s.name, label: s.display_name + (s.name === current ? ' (current)' : '') }));
    if (items.length === 0) {
      await alert('Change kernel', 'There is no kernel you may start.');
      return;
    }
    const name = await pick('Change kernel', 'Kernel', items, 'Change');
    this.p.refocus();
    if (!name || name === current) return;
    try {
      if (this.kernel.session) {
        await this.kernel.changeKernel(name);
      } else {
        this.p.model.metadata.kernelspec = { name, display_name: name };
        await this.p.connectKernel();
      }
      await this.p.noteKernel();
      this.p.model.markChanged();
    } catch (err) {
      void alert('Change kernel failed', messageOf(err));
    }
  }
}
