package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
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

var (
	randomKills = flag.Int("crash.random", 12, "random-moment SIGKILLs in TestCrashRandom")
	pointKills  = flag.Int("crash.kills", 2, "SIGKILLs per fault point (at its 2nd, 3rd, … hit in successive runs)")
)

// buildProg compiles a test program once per test binary run, with the
// fault points compiled in (-tags onceflow_faults).
func buildProg(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	args := []string{"build", "-tags", fault.Tag, "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("build %s: %v", pkg, err)
	}
	return bin
}

type crashRun struct {
	bin  string
	args []string
}

// start runs the program once with the given fault spec ("" for none) and
// returns whether it was killed (true) or exited cleanly (false).
func (c crashRun) once(t *testing.T, spec string, killAfter time.Duration) (killed bool, stderr string) {
	t.Helper()
	if spec != "" {
		faulttest.Require(t)
	}
	cmd := exec.Command(c.bin, c.args...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	cmd.Env = append(os.Environ(), fault.EnvVar+"="+spec)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var timer *time.Timer
	if killAfter > 0 {
		timer = time.AfterFunc(killAfter, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	}
	err := cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	if err == nil {
		return false, eb.String()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, eb.String()
		}
	}
	t.Fatalf("%s %v (fault %q): %v\n%s", c.bin, c.args, spec, err, eb.String())
	return false, ""
}

// readOut returns the batch files (name → bytes) and the number of repeats.
func readOut(t *testing.T, dir string) (map[string][]byte, int) {
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

func compareOut(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g, ok := got[n]
		if !ok {
			t.Errorf("%s missing after crashes", n)
			continue
		}
		if !bytes.Equal(g, want[n]) {
			t.Errorf("%s differs from the run without crashes:\n got %.300s\nwant %.300s", n, g, want[n])
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s exists after crashes but not in the run without crashes", n)
		}
	}
}

func progArgs(cp, out string, extra ...string) []string {
	return append([]string{"-checkpoint", cp, "-out", out, "-rows", "6000", "-per-batch", "500", "-keys", "13"}, extra...)
}

// TestCrashAtEveryFaultPoint kills a real query process with SIGKILL at
// each step of the batch protocol, several times, restarts it, and checks
// that the sink holds exactly what a run without crashes produced: every
// batch id once, with the same rows.
func TestCrashAtEveryFaultPoint(t *testing.T) {
	faulttest.Require(t)
	bin := buildProg(t, "github.com/onceflow/onceflow/tests/crashprog")
	for _, mode := range []string{"aggregate", "stateless", "windowed", "sliding", "sessions", "chain", "join", "tablejoin", "process"} {
		t.Run(mode, func(t *testing.T) {
			var extra []string
			switch mode {
			case "stateless":
				extra = []string{"-stateless"}
			case "windowed":
				extra = []string{"-windowed"}
			case "sessions":
				extra = []string{"-sessions"}
			case "join":
				extra = []string{"-join"}
			case "tablejoin":
				extra = []string{"-tablejoin"}
			case "chain":
				extra = []string{"-chain"}
			case "sliding":
				extra = []string{"-sliding"}
			case "process":
				extra = []string{"-process"}
			}
			refOut := t.TempDir()
			ref := crashRun{bin: bin, args: progArgs(t.TempDir(), refOut, extra...)}
			if killed, _ := ref.once(t, "", 0); killed {
				t.Fatal("reference run was killed")
			}
			want, reps := readOut(t, refOut)
			if len(want) < 12 || reps != 0 {
				t.Fatalf("reference run: %d batches, %d repeats; want at least 12, 0", len(want), reps)
			}
			if mode == "windowed" || mode == "sliding" || mode == "sessions" || mode == "chain" {
				checkWindowsOnce(t, want)
			}
			for _, point := range fault.EnginePoints() {
				t.Run(point, func(t *testing.T) {
					out := t.TempDir()
					c := crashRun{bin: bin, args: progArgs(t.TempDir(), out, extra...)}
					kills := 0
					// Kill at the 2nd, then 3rd, … hit of the point in
					// successive runs, then finish cleanly.
					for k := 2; k < 2+*pointKills; k++ {
						killed, stderr := c.once(t, fmt.Sprintf("%s@%d", point, k), 0)
						if !killed {
							break
						}
						if !strings.Contains(stderr, "onceflow-fault: "+point) {
							t.Fatalf("killed without reaching the fault point:\n%s", stderr)
						}
						kills++
					}
					if killed, _ := c.once(t, "", 0); killed {
						t.Fatal("clean run was killed")
					}
					got, repeats := readOut(t, out)
					compareOut(t, want, got)
					needsState := point == fault.EngineBeforeStateSync || point == fault.EngineAfterState || point == fault.EngineDuringSnapshot
					if kills == 0 && !(mode == "stateless" && needsState) {
						t.Errorf("the fault point was never reached")
					}
					t.Logf("%d kills, %d repeated AddBatch calls absorbed by the sink", kills, repeats)
				})
			}
		})
	}
}

// writeLanding writes files of per rows each holding the counter's rows
// as JSON lines, so a files-source run sees the counter's batches.
func writeLanding(t *testing.T, dir string, rows, per int64) {
	t.Helper()
	for f := int64(0); f*per < rows; f++ {
		var b strings.Builder
		for i := f * per; i < min((f+1)*per, rows); i++ {
			ts := i * 10_000
			if i%5 == 0 {
				ts -= 700_000
			}
			fmt.Fprintf(&b, `{"i":%d,"key":"k%d","amount":%d,"ts":"%s"}`+"\n", i, i%13, i*7%1000,
				time.UnixMicro(ts).UTC().Format("2006-01-02T15:04:05.000000Z"))
		}
		name := filepath.Join(dir, fmt.Sprintf("part-%04d.json", f))
		if err := os.WriteFile(name+".tmp", []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(name+".tmp", name); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCrashFilesSource is the aggregation crash test with the files
// source: a landing directory of JSON-lines files, one taken per batch, into
// GroupBy(key).Agg(sum, count), killed at every protocol step; the sink
// must hold exactly what the counter-source run without crashes produced.
func TestCrashFilesSource(t *testing.T) {
	faulttest.Require(t)
	bin := buildProg(t, "github.com/onceflow/onceflow/tests/crashprog")
	refOut := t.TempDir()
	ref := crashRun{bin: bin, args: progArgs(t.TempDir(), refOut)}
	if killed, _ := ref.once(t, "", 0); killed {
		t.Fatal("reference run was killed")
	}
	want, _ := readOut(t, refOut)
	for _, point := range append(fault.EnginePoints(), fault.FilesAfterLog, fault.FilesAfterCompact, fault.FilesAfterLogPurge) {
		t.Run(point, func(t *testing.T) {
			landing, out := t.TempDir(), t.TempDir()
			writeLanding(t, landing, 6000, 500)
			c := crashRun{bin: bin, args: progArgs(t.TempDir(), out, "-landing", landing)}
			kills := 0
			// The files log compacts every 10th entry: a run of 12 files
			// reaches the compaction points once, so kill at their first hit.
			first := 2
			if point == fault.FilesAfterCompact || point == fault.FilesAfterLogPurge {
				first = 1
			}
			for k := first; k < first+*pointKills; k++ {
				killed, _ := c.once(t, fmt.Sprintf("%s@%d", point, k), 0)
				if !killed {
					break
				}
				kills++
			}
			if killed, _ := c.once(t, "", 0); killed {
				t.Fatal("clean run was killed")
			}
			got, repeats := readOut(t, out)
			compareOut(t, want, got)
			if kills == 0 {
				t.Errorf("fault point %s never reached", point)
			}
			t.Logf("%d kills, %d repeats absorbed", kills, repeats)
		})
	}
}

// checkWindowsOnce checks that every closed window of the windowed run
// appears exactly once across batches, with the sum the input gives it.
func checkWindowsOnce(t *testing.T, out map[string][]byte) {
	t.Helper()
	seen := map[string]int{}
	for _, b := range out {
		var rows [][]any
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			seen[fmt.Sprint(r[0], r[2])]++
		}
	}
	if len(seen) == 0 {
		t.Fatal("no window was emitted")
	}
	for w, n := range seen {
		if n != 1 {
			t.Errorf("window %s emitted %d times", w, n)
		}
	}
}

// TestCrashRandom kills the process at random moments (SIGKILL from the
// test) until it finishes, and compares the sink with a run that never
// crashed; it repeats on fresh checkpoints until -crash.random kills landed.
func TestCrashRandom(t *testing.T) {
	bin := buildProg(t, "github.com/onceflow/onceflow/tests/crashprog")
	t.Run("aggregate", func(t *testing.T) { crashRandom(t, bin, *randomKills) })
	// A chain of two operators (windows per key, then per window): half
	// the kills, as the aggregate's protocol is the same.
	t.Run("chain", func(t *testing.T) { crashRandom(t, bin, max(1, *randomKills/2), "-chain") })
}

func crashRandom(t *testing.T, bin string, wantKills int, extra ...string) {
	args := func(cp, out string) []string {
		return append([]string{"-checkpoint", cp, "-out", out, "-rows", "40000", "-per-batch", "500", "-keys", "29"}, extra...)
	}
	refOut := t.TempDir()
	ref := crashRun{bin: bin, args: args(t.TempDir(), refOut)}
	start := time.Now()
	ref.once(t, "", 0)
	full := time.Since(start)
	want, _ := readOut(t, refOut)

	rng := rand.New(rand.NewPCG(1, 2))
	kills, runs, rounds, repeats := 0, 0, 0, 0
	for kills < wantKills && rounds < 1000 {
		rounds++
		out := t.TempDir()
		c := crashRun{bin: bin, args: args(t.TempDir(), out)}
		roundKills := 0
		for ; runs < 100000; runs++ {
			var after time.Duration
			if roundKills < 15 {
				// Mostly short lives, so kills land in every phase of the
				// protocol, including startup and recovery.
				after = 5*time.Millisecond + time.Duration(rng.Int64N(int64(full/10)))
			}
			killed, _ := c.once(t, "", after)
			if !killed {
				runs++
				break
			}
			roundKills++
		}
		kills += roundKills
		got, r := readOut(t, out)
		repeats += r
		compareOut(t, want, got)
		if t.Failed() {
			return
		}
	}
	if kills < wantKills {
		t.Errorf("only %d random kills landed in %d rounds; want %d", kills, rounds, wantKills)
	}
	t.Logf("%d random kills over %d runs in %d rounds (a clean run takes %s), %d repeated batches absorbed", kills, runs, rounds, full, repeats)
}
