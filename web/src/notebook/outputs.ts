// A code cell's output area: the outputs (kept in the cell's model, as nbformat 4 saves them)
// and their elements, drawn with the renderers. Stream text is appended once per animation
// frame, so that a flood of prints does not freeze the page; clear_output(wait=True) clears
// on the next output; display ids are tracked so that update_display_data finds its outputs.
// Long outputs scroll inside their own box (the renderers' nb-output-scrolled).
import type * as nbformat from '@jupyterlab/nbformat';
import type { KernelMessage } from '@jupyterlab/services';
import { appendStream, renderOutput } from '../render/index';
import { h } from '../shell/dom';

type Schedule = (f: () => void) => void;

const defaultSchedule: Schedule = (f) => {
  if (typeof requestAnimationFrame === 'function') {
    requestAnimationFrame(() => f());
  } else {
    setTimeout(f, 16);
  }
};

function joined(v: nbformat.MultilineString | undefined): string {
  return Array.isArray(v) ? v.join('') : (v ?? '');
}

interface DisplayEntry {
  area: OutputArea;
  output: nbformat.IOutput;
  el: HTMLElement;
}

/** DisplayRegistry maps display ids to the outputs that show them, across the notebook. */
export class DisplayRegistry {
  private byId = new Map<string, DisplayEntry[]>();

  add(id: string, e: DisplayEntry): void {
    const list = (this.byId.get(id) ?? []).filter((x) => x.area.has(x.output));
    list.push(e);
    this.byId.set(id, list);
  }

  /** update redraws every output with the id with new data; returns how many. */
  update(id: string, data: nbformat.IMimeBundle, metadata: nbformat.OutputMetadata): number {
    const list = (this.byId.get(id) ?? []).filter((x) => x.area.has(x.output));
    for (const e of list) {
      const next = { ...e.output, data, metadata } as nbformat.IOutput;
      e.el = e.area.replace(e.output, e.el, next);
      e.output = next;
    }
    this.byId.set(id, list);
    return list.length;
  }
}

export interface OutputAreaOptions {
  registry: DisplayRegistry;
  /** Called whenever the outputs change (the notebook is then dirty). */
  onChange?: () => void;
  schedule?: Schedule;
}

/** An IOPub message's content, as the kernel sends it, with its type. */
export interface IOPubContent {
  msgType: string;
  content: Record<string, unknown>;
}

/** outputFromMessage turns an IOPub output message into an nbformat output (null if it is
 * not one), and the display id it carries, if any. */
export function outputFromMessage(m: IOPubContent): { output: nbformat.IOutput; displayId?: string } | null {
  // The content is typed as the message spec has it; the fallbacks are for kernels that leave
  // a field out.
  const transient = m.content.transient as { display_id?: string } | undefined;
  const displayId = transient?.display_id || undefined;
  switch (m.msgType) {
    case 'stream': {
      const c = m.content as KernelMessage.IStreamMsg['content'];
      return { output: { output_type: 'stream', name: c.name, text: c.text } };
    }
    case 'display_data': {
      const c = m.content as KernelMessage.IDisplayDataMsg['content'];
      return { output: { output_type: 'display_data', data: c.data ?? {}, metadata: c.metadata ?? {} }, displayId };
    }
    case 'execute_result': {
      const c = m.content as KernelMessage.IExecuteResultMsg['content'];
      return {
        output: {
          output_type: 'execute_result',
          data: c.data ?? {},
          metadata: c.metadata ?? {},
          execution_count: c.execution_count ?? null,
        },
        displayId,
      };
    }
    case 'error': {
      const c = m.content as KernelMessage.IErrorMsg['content'];
      return { output: { output_type: 'error', ename: c.ename, evalue: c.evalue, traceback: c.traceback ?? [] } };
    }
  }
  return null;
}

export class OutputArea {
  readonly node: HTMLElement;
  private outputs: nbformat.IOutput[];
  private els: HTMLElement[] = [];
  private clearPending = false;
  private pendingText = new Map<HTMLElement, string>();
  private flushScheduled = false;
  private registry: DisplayRegistry;
  private onChange: () => void;
  private schedule: Schedule;

  constructor(outputs: nbformat.IOutput[], opts: OutputAreaOptions) {
    this.outputs = outputs;
    this.registry = opts.registry;
    this.onChange = opts.onChange ?? (() => {});
    this.schedule = opts.schedule ?? defaultSchedule;
    this.node = h('div', { class: 'nb-outputs', role: 'region' });
    // The notebook the user works in is trusted (docs/pages.md, "Outputs and trust"): its HTML
    // may keep <style>; it is sanitised either way.
    for (const o of outputs) {
      const el = this.render(o, true);
      this.els.push(el);
      this.node.append(el);
    }
    this.node.hidden = outputs.length === 0;
  }

  /** setLabel names the region ("Output of cell N"). */
  setLabel(label: string): void {
    this.node.setAttribute('aria-label', label);
  }

  /** The model's outputs (the same array the cell saves). */
  get list(): readonly nbformat.IOutput[] {
    return this.outputs;
  }

  has(o: nbformat.IOutput): boolean {
    return this.outputs.includes(o);
  }

  private render(o: nbformat.IOutput, trusted: boolean): HTMLElement {
    try {
      return renderOutput(o, { trusted });
    } catch (err) {
      return h('pre', { class: 'nb-output nb-error' }, 'Cannot show this output: ' + String(err));
    }
  }

  /** clear removes the outputs now, or (wait) just before the next output arrives. */
  clear(wait = false): void {
    if (wait) {
      this.clearPending = true;
      return;
    }
    this.clearPending = false;
    this.outputs.length = 0;
    this.els = [];
    this.pendingText.clear();
    this.node.replaceChildren();
    this.node.hidden = true;
    this.onChange();
  }

  /** add adds an output. */
  add(output: nbformat.IOutput, displayId?: string, trusted = true): void {
    if (this.clearPending) {
      this.clear(false);
    }
    this.node.hidden = false;
    const last = this.outputs[this.outputs.length - 1];
    if (
      output.output_type === 'stream' &&
      last &&
      last.output_type === 'stream' &&
      (last as nbformat.IStream).name === (output as nbformat.IStream).name
    ) {
      const text = joined((output as nbformat.IStream).text);
      (last as nbformat.IStream).text = joined((last as nbformat.IStream).text) + text;
      this.queueText(this.els[this.els.length - 1], text);
      this.onChange();
      return;
    }
    if (output.output_type === 'stream') {
      // Copy, for the model's text grows as more comes.
      output = { ...output, text: joined((output as nbformat.IStream).text) };
      const el = this.render({ ...output, text: '' }, trusted);
      this.outputs.push(output);
      this.els.push(el);
      this.node.append(el);
      this.queueText(el, joined((output as nbformat.IStream).text));
      this.onChange();
      return;
    }
    if (displayId) {
      // A display with an id shown before updates the earlier ones too.
      this.registry.update(
        displayId,
        (output as nbformat.IDisplayData).data,
        (output as nbformat.IDisplayData).metadata ?? {},
      );
    }
    const el = this.render(output, trusted);
    this.outputs.push(output);
    this.els.push(el);
    this.node.append(el);
    if (displayId) {
      this.registry.add(displayId, { area: this, output, el });
    }
    this.onChange();
  }

  /** replace swaps one output for another (update_display_data) and returns the new element. */
  replace(old: nbformat.IOutput, oldEl: HTMLElement, next: nbformat.IOutput): HTMLElement {
    const i = this.outputs.indexOf(old);
    if (i < 0) {
      return oldEl;
    }
    const el = this.render(next, true);
    this.outputs[i] = next;
    this.els[i].replaceWith(el);
    this.els[i] = el;
    this.onChange();
    return el;
  }

  private queueText(el: HTMLElement, text: string): void {
    if (text === '') {
      return;
    }
    this.pendingText.set(el, (this.pendingText.get(el) ?? '') + text);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      this.schedule(() => this.flush());
    }
  }

  /** flush draws the stream text that came since the last frame. */
  flush(): void {
    this.flushScheduled = false;
    for (const [el, text] of this.pendingText) {
      if (el.isConnected || this.node.contains(el)) {
        appendStream(el, text);
      }
    }
    this.pendingText.clear();
  }

  /** requestInput shows an input field for the kernel's input_request; resolves with the
   * value on Enter, then shows the prompt and (unless a password) the value as text. */
  requestInput(prompt: string, password: boolean): Promise<string> {
    if (this.clearPending) {
      this.clear(false);
    }
    this.node.hidden = false;
    const input = h('input', {
      type: password ? 'password' : 'text',
      class: 'nb-stdin-input',
      'aria-label': prompt.trim() || 'Input',
      autocomplete: 'off',
    });
    const row = h('div', { class: 'nb-stdin' }, h('span', { class: 'nb-stdin-prompt' }, prompt), input);
    this.node.append(row);
    queueMicrotask(() => input.focus());
    return new Promise((resolve) => {
      input.addEventListener('keydown', (e) => {
        if (e.key !== 'Enter' || e.shiftKey || e.ctrlKey || e.altKey) {
          return;
        }
        e.preventDefault();
        e.stopPropagation();
        const value = input.value;
        row.remove();
        this.add({
          output_type: 'stream',
          name: 'stdout',
          text: prompt + (password ? '' : value) + '\n',
        });
        resolve(value);
      });
    });
  }

  /** cancelInput removes a pending input field (the kernel was interrupted or restarted). */
  cancelInput(): void {
    this.node.querySelectorAll('.nb-stdin').forEach((e) => e.remove());
  }
}
