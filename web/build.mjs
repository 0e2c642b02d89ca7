// Builds the pages' scripts and styles into dist/, which the Go package web embeds.
// `node build.mjs` for the minified build; `--watch` rebuilds on change during development.
import * as esbuild from 'esbuild';
import { rm, mkdir, readFile, writeFile } from 'node:fs/promises';
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
if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
  console.log('web: watching src/');
} else {
  const result = await esbuild.build(options);
  // Scripts and styles are also stored gzipped, which the server sends to browsers that
  // accept it: no compression per request.
  let gzipped = 0;
  for (const out of Object.keys(result.metafile.outputs)) {
    if (/\.(js|css)$/.test(out)) {
      const gz = gzipSync(await readFile(out), { level: 9 });
      await writeFile(out + '.gz', gz);
      gzipped += out.endsWith('.js') ? gz.length : 0;
    }
  }
  const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
  console.log(
    `web: built ${Object.keys(result.metafile.outputs).length} files, ${(bytes / 1024).toFixed(0)} KiB, ` +
      `into dist/ (scripts ${(gzipped / 1024).toFixed(0)} KiB gzipped)`,
  );
}
