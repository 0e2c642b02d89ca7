// Running a code cell on the kernel: its outputs, execution count, input prompts and state.
import type { KernelMessage } from '@jupyterlab/services';
import type * as nbformat from '@jupyterlab/nbformat';
import type { CellView } from './cellview';
import type { KernelSession } from './kernel';
import { outputFromMessage } from './outputs';

/** CellRunner runs cells on the kernel and shows what their executions send. */
export class CellRunner {
  /** Each cell's latest execution, so that an earlier one's late output is not shown. */
  private runs = new WeakMap<CellView, number>();

  /** changed is told when a run changes a cell (its outputs, its execution count). */
  constructor(
    private kernel: KernelSession,
    private changed: () => void,
  ) {}

  /** run renders a markdown cell, or executes a code cell and shows its outputs; it ends when
   * the execution does. */
  run(v: CellView): Promise<void> {
    if (v.cell.type === 'markdown') {
      v.renderMarkdownCell();
      return Promise.resolve();
    }
    if (v.cell.type !== 'code' || !v.outputs) {
      return Promise.resolve();
    }
    const out = v.outputs;
    if (v.cell.source.trim() === '') {
      out.clear();
      v.setExecutionCount(null);
      return Promise.resolve();
    }
    out.clear();
    v.setRunning('queued');
    this.changed();
    // Running a cell again leaves what its earlier execution still sends unshown.
    const run = (this.runs.get(v) ?? 0) + 1;
    this.runs.set(v, run);
    const current = () => this.runs.get(v) === run;
    let p: Promise<void>;
    try {
      p = this.kernel.execute(
        v.cell.source,
        {
          onIOPub: (m) => {
            if (!current()) return;
            const t = m.header.msg_type;
            if (t === 'execute_input') {
              v.setRunning('running');
              return;
            }
            if (t === 'clear_output') {
              out.clear((m.content as KernelMessage.IClearOutputMsg['content']).wait);
              return;
            }
            if (t === 'update_display_data') {
              return; // the registry's, by display id
            }
            const o = outputFromMessage({ msgType: t, content: m.content as Record<string, unknown> });
            if (o) {
              out.add(o.output, o.displayId);
            }
          },
          onInput: (p, password) => out.requestInput(p, password),
          onReply: (r) => {
            if (!current()) return;
            if (r.status === 'ok' || r.status === 'error') {
              v.setExecutionCount(r.execution_count ?? null);
            }
            if (r.status === 'ok') {
              for (const pl of (
                r as KernelMessage.IExecuteReply & { payload?: { source: string; data?: nbformat.IMimeBundle }[] }
              ).payload ?? []) {
                if (pl.source === 'page' && pl.data) {
                  out.add({ output_type: 'display_data', data: pl.data, metadata: {} });
                }
              }
            }
            this.changed();
          },
        },
        v.cell.id,
      );
    } catch {
      v.setRunning(null);
      return Promise.resolve();
    }
    // When the execution ends (an interrupt ends a pending input() too), no input field stays.
    const end = () => {
      if (!current()) return;
      v.setRunning(null);
      out.cancelInput();
    };
    return p.then(end, end);
  }
}
