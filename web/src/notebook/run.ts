// Running a code cell on the kernel: its outputs, execution count, input prompts and state.
import type { KernelMessage } from '@jupyterlab/services';
import type * as nbformat from '@jupyterlab/nbformat';
import type { CellView } from './cellview';
import type { KernelSession } from './kernel';
import { outputFromMessage } from './outputs';

/** runningMark is the msg_id of a run still going when the server wrote the cell (the
 * kernel's agent writes the outputs of a run whose page left, and marks the cell meanwhile
 * under metadata.nbkube.running); undefined when none. */
export function runningMark(metadata: Record<string, unknown>): string | undefined {
  const own = metadata.nbkube as Record<string, unknown> | undefined;
  const id = own?.running;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/** dropRunningMark takes the mark away (and metadata.nbkube with its last key). */
export function dropRunningMark(metadata: Record<string, unknown>): void {
  const own = metadata.nbkube as Record<string, unknown> | undefined;
  if (!own || !('running' in own)) return;
  delete own.running;
  if (Object.keys(own).length === 0) delete metadata.nbkube;
}

/** CellRunner runs cells on the kernel and shows what their executions send. */
export class CellRunner {
  /** Each cell's latest execution, so that an earlier one's late output is not shown. */
  private runs = new WeakMap<CellView, number>();

  /** changed is told when a run changes a cell (its outputs, its execution count); quietly
   * makes the changes of a followed run, which the file gets from the kernel's agent. */
  constructor(
    private kernel: KernelSession,
    private changed: () => void,
    private quietly: (fn: () => void) => void = (fn) => fn(),
  ) {}

  /** follow shows a run that another page started and the server recorded as still going
   * (runningMark): the cell is marked running, and what the kernel sends of that run (its
   * request's msg_id) lands in it, until the kernel is idle after it. The outputs the server
   * wrote before the page opened are the cell's already; fresh (a run the page asked the
   * server for) clears them as the run starts. What lands does not make the notebook
   * unsaved: the kernel's agent writes that run into the file itself. */
  follow(
    v: CellView,
    msgId: string,
    iopub: (l: (m: KernelMessage.IIOPubMessage) => boolean) => void,
    fresh = false,
  ): void {
    if (v.cell.type !== 'code' || !v.outputs) return;
    const run = (this.runs.get(v) ?? 0) + 1;
    this.runs.set(v, run);
    v.setRunning('running');
    iopub((m) => {
      let done = false;
      this.quietly(() => {
        done = this.followed(v, run, msgId, fresh, m);
      });
      return done;
    });
  }

  /** followed shows m if it is of the followed run of v; true once that run ended. */
  private followed(v: CellView, run: number, msgId: string, fresh: boolean, m: KernelMessage.IIOPubMessage): boolean {
    const out = v.outputs;
    if (!out || this.runs.get(v) !== run) return true; // run again here since: no longer followed
    if ((m.parent_header as { msg_id?: string } | undefined)?.msg_id !== msgId) return false;
    const t = m.header.msg_type;
    const c = m.content as Record<string, unknown>;
    if (t === 'status') {
      if (c.execution_state !== 'idle') return false;
      v.setRunning(null);
      dropRunningMark(v.cell.metadata);
      return true;
    }
    if (t === 'execute_input') {
      // A run the page asked for replaces the cell's outputs as it starts.
      if (fresh) out.clear(false);
      v.setExecutionCount(typeof c.execution_count === 'number' ? c.execution_count : null);
    } else if (t === 'clear_output') {
      out.clear((c as KernelMessage.IClearOutputMsg['content']).wait);
    } else if (t !== 'update_display_data') {
      const o = outputFromMessage({ msgType: t, content: c });
      if (o) {
        out.add(o.output, o.displayId);
        if (t === 'execute_result' && typeof c.execution_count === 'number') {
          v.setExecutionCount(c.execution_count);
        }
      }
    }
    return false;
  }

  /** unfollow stops following a recorded run that is not going after all, and takes its
   * mark away. */
  unfollow(v: CellView): void {
    this.runs.set(v, (this.runs.get(v) ?? 0) + 1);
    v.setRunning(null);
    dropRunningMark(v.cell.metadata);
  }

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
