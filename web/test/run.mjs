// Runs the front end's unit tests: every src/**/*.test.ts, bundled by esbuild for Node (the
// tests import the modules they test as the pages do), then `node --test` on the bundles.
// Tests that need a DOM call installDOM() from src/testing/dom.ts (jsdom).
import * as esbuild from 'esbuild';
import { spawnSync } from 'node:child_process';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join, relative } from 'node:path';

const root = new URL('../', import.meta.url).pathname;

async function tests(dir) {
  const out = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      out.push(...(await tests(p)));
    } else if (e.name.endsWith('.test.ts')) {
      out.push(p);
    }
  }
  return out;
}

const entries = await tests(join(root, 'src'));
// Beside node_modules, so that the bundles' imports of packages resolve.
const outdir = join(root, 'test', '.out');
await rm(outdir, { recursive: true, force: true });
await mkdir(outdir, { recursive: true });
try {
  await esbuild.build({
    entryPoints: entries,
    outdir,
    outbase: join(root, 'src'),
    outExtension: { '.js': '.mjs' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    loader: { '.css': 'empty' },
    logLevel: 'warning',
    sourcemap: 'inline',
  });
  const files = entries.map((e) => join(outdir, relative(join(root, 'src'), e)).replace(/\.ts$/, '.mjs'));
  const r = spawnSync(process.execPath, ['--enable-source-maps', '--test', ...files], { stdio: 'inherit', cwd: root });
  process.exitCode = r.status ?? 1;
} finally {
  await rm(outdir, { recursive: true, force: true });
}
