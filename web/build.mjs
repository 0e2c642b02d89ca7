// Builds the pages' scripts and styles into dist/, which the Go package web embeds.
// `node build.mjs` for the minified build; `--watch` rebuilds on change during development.
import * as esbuild from 'esbuild';
import { rm, mkdir, readFile, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { gzipSync } from 'node:zlib';

const watch = process.argv.includes('--watch');
const outdir = new URL('./dist/', import.meta.url).pathname;

const options = {
  entryPoints: {
    dashboard: 'src/dashboard/main.ts',
    notebook: 'src/notebook/main.ts',
    print: 'src/print/main.ts',
    editor: 'src/editor/main.ts',
    viewer: 'src/viewer/main.ts',
    terminal: 'src/terminal/main.ts',
  },
  bundle: true,
  format: 'esm',
  splitting: true,
  outdir,
  entryNames: '[name]',
  chunkNames: 'chunk-[hash]',
  assetNames: 'asset-[name]-[hash]',
  minify: !watch,
  target: ['chrome110', 'firefox115', 'safari16'],
  loader: { '.woff2': 'file', '.woff': 'file', '.ttf': 'file', '.svg': 'file' },
  define: { 'process.env.NODE_ENV': '"production"' },
  legalComments: 'linked',
  metafile: true,
  logLevel: 'warning',
};

await rm(outdir, { recursive: true, force: true });
await mkdir(outdir, { recursive: true });
await writeFile(
  outdir + '.gitkeep',
  '# Built assets land here (make web); the placeholder lets go:embed compile without them.\n',
);

// plotly.js is copied as npm ships it, under a name with its content's hash (cached for a
// year), for the output frames only: no page's script imports it.
const plotly = await readFile(createRequire(import.meta.url).resolve('plotly.js-dist-min'));
const plotlyFile = `asset-plotly-${createHash('sha256').update(plotly).digest('hex').slice(0, 12)}.js`;
await writeFile(outdir + plotlyFile, plotly);

// The output frame's script (src/render/frame.ts): a classic script, since a module would
// need CORS from the frame's opaque origin.
const frameOptions = {
  ...options,
  entryPoints: { outputframe: 'src/outputframe/main.ts' },
  format: 'iife',
  splitting: false,
  define: { ...options.define, PLOTLY_FILE: JSON.stringify(plotlyFile) },
};

if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
  await (await esbuild.context(frameOptions)).watch();
  console.log('web: watching src/');
} else {
  const [result, frame] = await Promise.all([esbuild.build(options), esbuild.build(frameOptions)]);
  Object.assign(result.metafile.outputs, frame.metafile.outputs, {
    ['dist/' + plotlyFile]: { bytes: plotly.length },
  });
  // Scripts and styles are also stored gzipped, which the server sends to browsers that
  // accept it: no compression per request.
  let gzipped = 0;
  let plotlyGzipped = 0;
  for (const out of Object.keys(result.metafile.outputs)) {
    if (/\.(js|css)$/.test(out)) {
      const gz = gzipSync(await readFile(out), { level: 9 });
      await writeFile(out + '.gz', gz);
      if (out.endsWith(plotlyFile)) {
        plotlyGzipped = gz.length;
      } else if (out.endsWith('.js')) {
        gzipped += gz.length;
      }
    }
  }
  const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
  console.log(
    `web: built ${Object.keys(result.metafile.outputs).length} files, ${(bytes / 1024).toFixed(0)} KiB, ` +
      `into dist/ (scripts ${(gzipped / 1024).toFixed(0)} KiB gzipped, ` +
      `and plotly.js for output frames ${(plotlyGzipped / 1024).toFixed(0)} KiB)`,
  );
}
