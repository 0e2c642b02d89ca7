// Package repository reads and writes nbkube's custom resources for the API server, scoped to
// the requesting user, and answers in Jupyter's models (internal/jupyter): the API server
// never sees a custom resource. Users see and touch only their own kernels, sessions and
// clusters (admins all); every kernel spec is everyone's. Refusals are domain errors of one
// type, Error, whose kinds the API server maps to HTTP; any other error is a failure.
//
// Reads go to a cache that lags behind writes: after a write, the calls wait (briefly) until
// the cache shows it, so that a client's next request sees what it just did.
package repository
