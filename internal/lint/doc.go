// Package lint holds tests that keep the module's import graph the way
// STYLE.md and DESIGN.md draw it, in the manner of pebble's internal/lint:
//
//   - contract, the leaf package of the source and sink contracts, imports
//     only Arrow, storage and the standard library;
//   - checkpoint, which owns the checkpoint's layout and formats, imports
//     only offsetlog, storage and the standard library;
//   - no package imports engine except the engine's own subpackages, the
//     commands (cmd/), examples (examples/), tests (tests/), benchmarks
//     (bench/, its own module), the SQL front end (sql/, its own module)
//     and the plugins built on the engine's listener API (monitor). Test files may import engine to run a query
//     end to end (audit's tests, kafkasink/e2e);
//   - engine links neither the Prometheus client nor an HTTP server of its
//     own: those belong to monitor, which a user who never serves metrics
//     does not import.
//
// The tests run `go list`, so they need the go command on PATH; they skip
// without it. The package has no code.
package lint
