package pebblestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
)

// TestCrashOnPebble is the engine's crash test (tests/crash_test.go) on the
// pebble backend, for a group-by (GroupBy(key).Agg(sum, count), update
// mode), a deduplication (DropDuplicates(key, bucket)) and a sliding
// window by panes in append mode, which evicts through the working copy's
// time index (late rows included): a real query
// process (internal/crashprog, built with the fault points) is killed
// with SIGKILL at the 2nd hit of each of the engine's fault points and
// restarted until it finishes, and its sink must then hold exactly what a
// run without crashes wrote: every batch id once, byte for byte. At every
// other point, per operator, the restart runs on another machine: the
// pebble working directory is deleted after the kill, so the state comes
// back from the uploaded SSTs and the deltas after them (the two operators
// take complementary points, so each point is run both ways); there the
// restart is killed again at the point's 5th hit, when uploaded snapshots
// exist, and the working copy is deleted again.
//
//	cd statestore/pebblestore && go test -race -tags onceflow_faults -count=1 -run TestCrashOnPebble ./
func TestCrashOnPebble(t *testing.T) {
	faulttest.Require(t)
	bin := buildCrashProg(t)
	var wipedWithManifest int
	for m, mode := range []string{"groupBy", "dedup", "sliding"} {
		t.Run(mode, func(t *testing.T) {
			var extra []string
			switch mode {
			case "dedup":
				extra = []string{"-dedup"}
			case "sliding":
				extra = []string{"-sliding"}
			}
			ref := newCrashRun(t, bin, extra)
			if killed, _ := ref.once(t, ""); killed {
				t.Fatal("reference run was killed")
			}
			want, reps := readBatches(t, ref.out)
			if len(want) < 10 || reps != 0 {
				t.Fatalf("reference run: %d batches, %d repeats; want at least 10, 0", len(want), reps)
			}
			if n := manifests(t, ref.cp); n == 0 {
				t.Fatal("reference run uploaded no snapshot (no <N>.pebble manifest in the checkpoint)")
			}
			for i, point := range fault.EnginePoints() {
				wipe := (i+m)%2 == 1
				name := point
				if wipe {
					name += "/wipe"
				}
				t.Run(name, func(t *testing.T) {
					c := newCrashRun(t, bin, extra)
					// Kill at the point's 2nd hit; on a wiped machine, kill
					// the restart again at its 5th hit, when uploaded
					// snapshots exist, and wipe again.
					specs := []string{point + "@2"}
					if wipe {
						specs = append(specs, point+"@5")
					}
					var log []string
					finished := false
					for k, spec := range specs {
						killed, stderr := c.once(t, spec)
						if !killed {
							if k == 0 {
								t.Fatalf("the fault point %s was never hit twice", point)
							}
							log = append(log, spec+": not reached, the run finished")
							finished = true
							break
						}
						if !strings.Contains(stderr, "onceflow-fault: "+point) {
							t.Fatalf("killed without reaching the fault point:\n%s", stderr)
						}
						if !wipe {
							log = append(log, "killed at "+spec+", working copy kept")
							continue
						}
						n := manifests(t, c.cp)
						if n > 0 {
							wipedWithManifest++
						}
						if err := os.RemoveAll(c.work); err != nil {
							t.Fatal(err)
						}
						log = append(log, fmt.Sprintf("killed at %s, working copy deleted (%d manifests in the checkpoint)", spec, n))
					}
					if !finished {
						if killed, _ := c.once(t, ""); killed {
							t.Fatal("clean run was killed")
						}
					}
					got, repeats := readBatches(t, c.out)
					compareBatches(t, want, got)
					t.Logf("%s; %d repeated AddBatch calls absorbed by the sink", strings.Join(log, "; "), repeats)
				})
			}
		})
	}
	if !t.Failed() && wipedWithManifest == 0 {
		t.Error("no restart on a deleted working copy found an uploaded snapshot to restore from")
	}
}

// buildCrashProg compiles internal/crashprog with the fault points (and
// -race when this test binary has it).
func buildCrashProg(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "crashprog")
	args := []string{"build", "-tags", fault.Tag, "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "github.com/onceflow/onceflow/statestore/pebblestore/internal/crashprog")...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("build crashprog: %v", err)
	}
	return bin
}

// crashRun is one query: its checkpoint, pebble working directory and
// sink directory, run by the program as often as it takes to finish.
type crashRun struct {
	bin           string
	cp, work, out string
	extra         []string
}

func newCrashRun(t *testing.T, bin string, extra []string) crashRun {
	dir := t.TempDir()
	c := crashRun{bin: bin, cp: filepath.Join(dir, "checkpoint"), work: filepath.Join(dir, "work"), out: filepath.Join(dir, "out"), extra: extra}
	return c
}

// once runs the program once with the fault spec ("" for none) and
// returns whether ONCEFLOW_FAULT killed it (true) or it finished (false);
// any other end fails the test.
func (c crashRun) once(t *testing.T, spec string) (killed bool, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args := append([]string{"-checkpoint", c.cp, "-work", c.work, "-out", c.out, "-rows", "3000", "-per-batch", "250", "-keys", "13"}, c.extra...)
	cmd := exec.CommandContext(ctx, c.bin, args...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	cmd.Env = append(os.Environ(), fault.EnvVar+"="+spec)
	err := cmd.Run()
	if err == nil {
		return false, eb.String()
	}
	if ctx.Err() != nil {
		t.Fatalf("crashprog %v (fault %q) did not finish in 2 min:\n%s", args, spec, eb.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, eb.String()
		}
	}
	t.Fatalf("crashprog %v (fault %q): %v\n%s", args, spec, err, eb.String())
	return false, ""
}

// readBatches returns the sink's batch files (name → bytes) and the number
// of repeated AddBatch calls it absorbed.
func readBatches(t *testing.T, dir string) (map[string][]byte, int) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	repeats := 0
	for _, e := range ents {
		switch {
		case strings.HasPrefix(e.Name(), "batch-"):
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = b
		case strings.HasPrefix(e.Name(), "repeat-"):
			repeats++
		}
	}
	return files, repeats
}

func compareBatches(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g, ok := got[n]
		if !ok {
			t.Errorf("%s missing after the crash", n)
			continue
		}
		if !bytes.Equal(g, want[n]) {
			t.Errorf("%s differs from the run without crashes:\n got %.300s\nwant %.300s", n, g, want[n])
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s exists after the crash but not in the run without crashes", n)
		}
	}
}

// manifests counts the pebble snapshot manifests (<N>.pebble) in a
// checkpoint directory.
func manifests(t *testing.T, cp string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(cp, "state"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".pebble") {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
