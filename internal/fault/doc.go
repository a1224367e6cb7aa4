// Package fault places named crash points in the batch protocol so tests can
// kill a real process at an exact step (etcd's raftBeforeSave and friends,
// compiled in only on demand like etcd's gofail).
//
// # Build tag
//
// The points exist only in a binary built with the tag onceflow_faults
// (Tag):
//
//	go test -tags onceflow_faults ./...
//	go build -tags onceflow_faults ./tests/crashprog
//
// Without it (every production build) Point is an empty function the
// compiler inlines away, Enabled is false, and ONCEFLOW_FAULT is never read:
// a production binary has no environment variable that kills it. Tests that
// need the points call faulttest.Require, which skips them with this how-to
// (or fails them under ONCEFLOW_REQUIRE_SERVICES=1, as in CI); the crash,
// e2e and chaos harnesses build their programs with the tag.
//
// # Arming
//
// In a tagged binary a point does nothing unless the process was started
// with the environment variable ONCEFLOW_FAULT (EnvVar) set to a
// comma-separated list of specs:
//
//	name        kill at the first hit of the named point
//	name@N      kill at the Nth hit (1-based) of the named point
//
// A kill is a real SIGKILL of the process itself: no deferred call, no
// buffered write, no exit handler runs, exactly as when an operator or the
// kernel kills it. Before dying the process writes one line
// "onceflow-fault: NAME" to standard error so a harness can tell a planned
// death from a crash.
//
// # Names
//
// Every point's name is a constant in points.go, with where in the protocol
// it sits; callers pass those constants, never their own strings, and a test
// (TestPointNamesMatchCallSites) parses the repository to keep the list and
// the call sites equal.
//
// The specification is read from the environment once, on the first hit;
// after that the package holds only hit counters. Safe for concurrent use.
package fault
