// Package cli is the command-line scaffolding the examples (lake,
// pgtotals, settlements, fraud) share, so that each example's main reads top to
// bottom with only what is its own: its source, its sink and its query.
//
// A Command registers the flags every example takes (-checkpoint,
// -trigger, -generate and -merchants, -retain, -v), builds the logger and
// the trigger from them, lands generated payments, opens stores through
// storage.Open with the S3 opener, runs the query (or several side by
// side: Query and RunQueries) until SIGTERM or SIGINT
// (engine.RunUntilSignal), prints one progress line per batch, and closes
// everything opened through it, newest first, when the program ends (the
// engine never closes what it is given). Main prints a failure as
// "<name>: <error>" and exits 1.
//
// It is example code, not part of onceflow's API.
package cli
