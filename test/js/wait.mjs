// Bounded waits shared by the client test files: a promise raced against a timer, and a
// condition checked on each emission of a Lumino signal.

// Resolves or rejects as promise does, or rejects naming what when ms pass first.
export function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Resolves once predicate() holds, checking now and after each emission of a Lumino signal.
export function waitFor(signal, predicate, what, ms) {
  let check;
  const met = new Promise((resolve) => {
    check = () => {
      if (predicate()) resolve();
    };
    signal.connect(check);
    check();
  });
  return within(met, ms, what).finally(() => signal.disconnect(check));
}
