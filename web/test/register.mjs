// Loaded by `node --import` before the tests: installs hooks.mjs, which lets Node import the
// TypeScript sources as the pages' bundler does.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
