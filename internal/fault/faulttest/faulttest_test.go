package faulttest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/internal/testenv"
)

const childEnv = "ONCEFLOW_FAULTTEST_CHILD"

// TestRequireChild is the child of TestRequire: a test that needs faults.
func TestRequireChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("child of TestRequire")
	}
	faulttest.Require(t)
	t.Log("ran with fault points")
}

// TestRequire runs TestRequireChild in this test binary with and without
// ONCEFLOW_REQUIRE_SERVICES=1: built with the tag it runs either way;
// built without, it skips with the how-to, and fails under the variable.
func TestRequire(t *testing.T) {
	for _, require := range []string{"", "1"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRequireChild$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1", testenv.RequireServicesEnvVar+"="+require)
		out, err := cmd.CombinedOutput()
		s := string(out)
		switch {
		case fault.Enabled:
			if err != nil || !strings.Contains(s, "ran with fault points") {
				t.Errorf("tagged, %s=%q: %v\n%s", testenv.RequireServicesEnvVar, require, err, s)
			}
		case require == "1":
			if err == nil || !strings.Contains(s, "--- FAIL: TestRequireChild") || !strings.Contains(s, faulttest.HowTo) {
				t.Errorf("untagged, %s=1: want a failure with the how-to, got %v\n%s", testenv.RequireServicesEnvVar, err, s)
			}
		default:
			if err != nil || !strings.Contains(s, "--- SKIP: TestRequireChild") || !strings.Contains(s, faulttest.HowTo) {
				t.Errorf("untagged: want a skip with the how-to, got %v\n%s", err, s)
			}
		}
	}
}
