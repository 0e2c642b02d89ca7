// Module hooks that let `node --test` run the TypeScript tests in src/ directly (Node 20 runs
// no TypeScript itself). They follow what esbuild does when it bundles the pages (build.mjs):
// each .ts file is compiled alone with tsconfig.json's options (it sets isolatedModules), a
// relative import without an extension finds its .ts file, and a stylesheet imports as nothing.
import { transform } from 'esbuild';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

const tsconfigRaw = JSON.parse(readFileSync(new URL('../tsconfig.json', import.meta.url), 'utf8'));

export async function resolve(specifier, context, nextResolve) {
  if (/^\.\.?\//.test(specifier) && context.parentURL?.endsWith('.ts') && !/\.\w+$/.test(specifier)) {
    for (const suffix of ['.ts', '/index.ts']) {
      const url = new URL(specifier + suffix, context.parentURL);
      if (existsSync(url)) {
        return { url: url.href, shortCircuit: true };
      }
    }
  }
  return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
  if (url.startsWith('file:') && url.endsWith('.css')) {
    return { format: 'module', source: '', shortCircuit: true };
  }
  if (url.startsWith('file:') && url.endsWith('.ts')) {
    const path = fileURLToPath(url);
    const { code } = await transform(await readFile(path, 'utf8'), {
      loader: 'ts',
      format: 'esm',
      target: 'node20',
      tsconfigRaw,
      sourcefile: path,
      sourcemap: 'inline',
    });
    return { format: 'module', source: code, shortCircuit: true };
  }
  return nextLoad(url, context);
}
