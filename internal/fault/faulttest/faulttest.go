// Package faulttest lets a test that needs fault points (a crash test
// that SIGKILLs a process at a named step) say so. Used by tests only.
package faulttest

import (
	"os"
	"testing"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/testenv"
)

// HowTo says how to run the tests that need fault points.
const HowTo = "this test needs the fault points, compiled in only with a build tag: " +
	"run it with -tags " + fault.Tag + ", as scripts/test.sh does"

// Require skips the test with HowTo when this binary was built without the
// onceflow_faults tag (its fault points cannot kill anything), or fails it
// when ONCEFLOW_REQUIRE_SERVICES=1 (as in CI), so a CI run cannot pass by
// skipping its crash tests.
func Require(t testing.TB) {
	t.Helper()
	if fault.Enabled {
		return
	}
	if os.Getenv(testenv.RequireServicesEnvVar) == "1" {
		t.Fatalf("%s=1 but %s", testenv.RequireServicesEnvVar, HowTo)
	}
	t.Skip(HowTo)
}
