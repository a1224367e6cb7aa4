package fault_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/onceflow/onceflow/internal/fault"
)

// buildSurvivor compiles testdata/survivor with the given go build flags.
func buildSurvivor(t *testing.T, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "survivor")
	args := append(append([]string{"build", "-o", bin}, flags...), "./testdata/survivor")
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// runArmed runs bin with every point armed at its first hit and reports
// whether SIGKILL ended it, and its output.
func runArmed(t *testing.T, bin string) (killed bool, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), fault.EnvVar+"="+strings.Join(fault.All(), ","))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, o.String(), e.String()
		}
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, e.String())
	}
	return false, o.String(), e.String()
}

// TestBuildWithoutTagIgnoresEnv builds a program that passes every fault
// point without the onceflow_faults tag and runs it with all of them armed:
// it must survive, and its binary must not even hold the variable's name.
// The same program built with the tag must die at the first point, so the
// test fails if the arming itself is broken.
func TestBuildWithoutTagIgnoresEnv(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	plain := buildSurvivor(t)
	killed, out, errOut := runArmed(t, plain)
	if killed || strings.TrimSpace(out) != "survived" {
		t.Fatalf("built without -tags %s, armed with %s: killed %v, stdout %q, stderr %q; want it to survive", fault.Tag, fault.EnvVar, killed, out, errOut)
	}
	if b, err := os.ReadFile(plain); err != nil {
		t.Fatal(err)
	} else if bytes.Contains(b, []byte(fault.EnvVar)) {
		t.Errorf("the binary built without -tags %s contains the string %s", fault.Tag, fault.EnvVar)
	}

	tagged := buildSurvivor(t, "-tags", fault.Tag)
	killed, out, errOut = runArmed(t, tagged)
	first := fault.All()[0]
	if !killed || out != "" || !strings.Contains(errOut, "onceflow-fault: "+first) {
		t.Fatalf("built with -tags %s, armed: killed %v, stdout %q, stderr %q; want a SIGKILL at %s", fault.Tag, killed, out, errOut, first)
	}
}
