// Package nbformat is Jupyter's notebook format as Python's nbformat 5.5 reads, upgrades,
// validates and writes it, for the contents store (package contents) and the notebook export
// (package nbconvert): clients must be served, and find on disk, the bytes Jupyter would give
// them.
//
// Reading. Read edits the stored JSON text into what nbformat's reader and Jupyter's get
// return (lines joined, transient fields stripped, cell ids repaired, code cells marked
// untrusted) without decoding it: package jsonspan finds the values to change and the rest
// is copied byte for byte (read.go). Validation stands apart (Validate): it costs far more
// than the rest of a read, and its verdict depends on the file's bytes alone, so a caller may
// keep it for a file version. Notebooks of nbformat 1 to 3 are decoded and upgraded
// (Upgrade) as nbformat.read(f, as_version=4) upgrades them, quirks included (upgrade.go).
//
// Writing. Write gives the bytes nbformat.write stores (sorted keys, one-space indent, lines
// split), and a notebook of nbformat 1 to 3 in its own version (write_v3.go, write_v12.go), as
// Jupyter saves it. Its validation against nbformat's schema (schema.go, validatemsg.go)
// comes apart, to run while the bytes go to disk: an invalid notebook is saved all the same,
// with the failure as the model's message. Large plain strings, base64 images mostly, are
// never decoded (elide.go). DowngradeV3 is nbformat's v4 to v3 downgrade, for IPython 1.x's
// clients.
//
// Refusals. A notebook the format cannot read, write or convert is refused with
// domainerr.ErrInvalid and nbformat's or Jupyter's reason; any other error is a failure of
// the package itself. Decoding is bounded in depth, and an upgrade cannot make a notebook
// much larger than its text (heading levels are budgeted). Reading, writing and upgrading are
// fuzzed, and the tests hold them to Python's nbformat and Jupyter Server where python3 has
// them.
//
// The package keeps no state but caches of pure functions of their input (the compiled
// schemas, cells known valid), so no two replicas can answer differently. It imports the
// standard library, the JSON span scanner, Python's text rules (pytext), the refusal type
// (domainerr) and a JSON schema validator only; depguard holds it to that (.golangci.yml).
package nbformat
