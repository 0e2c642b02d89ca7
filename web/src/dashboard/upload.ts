// Uploads, as Jupyter's own clients send them: a file in one PUT of base64 when it is small,
// else in 1 MiB chunks numbered 1, 2, ... with -1 for the last, which the server appends.
import type { Contents } from '@jupyterlab/services';
import { joinPath } from './paths';

/** CHUNK_SIZE is the bytes sent per request. */
export const CHUNK_SIZE = 1024 * 1024;

export interface ChunkPlan {
  start: number;
  end: number;
  /** The chunk's number (1, 2, ..., -1 for the last); absent when the file goes in one piece. */
  chunk?: number;
}

/** planChunks cuts size bytes into the requests that send them. */
export function planChunks(size: number, chunkSize = CHUNK_SIZE): ChunkPlan[] {
  if (size <= chunkSize) {
    return [{ start: 0, end: size }];
  }
  const n = Math.ceil(size / chunkSize);
  const plan: ChunkPlan[] = [];
  for (let i = 1; i <= n; i++) {
    plan.push({ start: (i - 1) * chunkSize, end: Math.min(i * chunkSize, size), chunk: i === n ? -1 : i });
  }
  return plan;
}

/** bytesToBase64 encodes bytes in base64, in slices small enough for fromCharCode's arguments. */
export function bytesToBase64(bytes: Uint8Array): string {
  let binary = '';
  const step = 0x8000;
  for (let i = 0; i < bytes.length; i += step) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + step) as unknown as number[]);
  }
  return btoa(binary);
}

/** The part of the contents manager an upload needs. */
export interface Saver {
  save(path: string, options: Partial<Contents.IModel>): Promise<Contents.IModel>;
}

/** uploadFile sends a file into dir under its own name, reporting the bytes sent after each
 * request; it resolves with the server's model of the new file. */
export async function uploadFile(
  saver: Saver,
  file: Blob & { name: string },
  dir: string,
  onProgress: (sent: number, total: number) => void = () => {},
  chunkSize = CHUNK_SIZE,
): Promise<Contents.IModel> {
  const path = joinPath(dir, file.name);
  let model: Contents.IModel | undefined;
  for (const part of planChunks(file.size, chunkSize)) {
    const bytes = new Uint8Array(await file.slice(part.start, part.end).arrayBuffer());
    const body: Partial<Contents.IModel> & { chunk?: number } = {
      type: 'file',
      format: 'base64',
      name: file.name,
      path,
      content: bytesToBase64(bytes),
    };
    if (part.chunk !== undefined) {
      body.chunk = part.chunk;
    }
    model = await saver.save(path, body);
    onProgress(part.end, file.size);
  }
  return model!;
}
