package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
)

// TestSIGTERM checks that each example, running on an interval trigger with
// batches back to back, exits 0 on SIGTERM with its last planned batch
// committed (offsets/ and commits/ end at the same batch, and the sink
// holds it), and that a restart then finishes the input exactly once.
func TestSIGTERM(t *testing.T) {
	t.Run("lake", func(t *testing.T) {
		dir := t.TempDir()
		in, lake, cp := filepath.Join(dir, "in"), filepath.Join(dir, "lake"), filepath.Join(dir, "cp")
		l := newLander(t, in, 53)
		l.land(30, 20)
		p := proc{bin: buildProg(t, lakePkg), args: []string{"-input", in, "-lake", lake, "-checkpoint", cp, "-trigger", "10ms", "-max-files-per-trigger", "1"}}
		last := stopWithSIGTERM(t, p, cp)
		if v := lakeVersion(t, lake); v != last {
			t.Errorf("lake at version %d after SIGTERM, the checkpoint committed %d", v, last)
		}
		p.args = append(p.args[:len(p.args)-4], "-trigger", "available-now")
		p.mustRun(t, "", 0)
		store, err := storage.OpenLocal(lake, storage.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		checkLake(t, store, l.all)
	})
	t.Run("lake-early", func(t *testing.T) {
		// A SIGTERM at any moment of startup ends the process promptly:
		// before the handler is installed by the signal's default action,
		// after it with exit 0; a query that has not begun is not lost
		// waiting for an interval trigger.
		dir := t.TempDir()
		in, lake, cp := filepath.Join(dir, "in"), filepath.Join(dir, "lake"), filepath.Join(dir, "cp")
		l := newLander(t, in, 73)
		l.land(3, 20)
		p := proc{bin: buildProg(t, lakePkg), args: []string{"-input", in, "-lake", lake, "-checkpoint", cp, "-trigger", "1h"}}
		for _, after := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond} {
			cmd, done, stderr := startProc(t, p)
			time.Sleep(after)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-done:
				if err != nil && !strings.Contains(err.Error(), "signal: terminated") {
					t.Fatalf("SIGTERM %s after start: %v\n%s", after, err, stderr.String())
				}
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("still running 30 s after a SIGTERM %s after start:\n%s", after, stderr.String())
			}
			if last, planned := lastCommit(t, cp), lastIn(t, filepath.Join(cp, "offsets")); last != planned {
				t.Errorf("after SIGTERM %s after start batch %d is planned but the last commit is %d", after, planned, last)
			}
		}
		p.args[len(p.args)-1] = "available-now"
		p.mustRun(t, "", 0)
		store, err := storage.OpenLocal(lake, storage.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		checkLake(t, store, l.all)
	})
	t.Run("lake-twice", func(t *testing.T) {
		// A second signal abandons the batch in flight: the process exits
		// at once (0 if that batch had already committed, 1 otherwise) and
		// a restart finishes the input exactly once.
		dir := t.TempDir()
		in, lake, cp := filepath.Join(dir, "in"), filepath.Join(dir, "lake"), filepath.Join(dir, "cp")
		l := newLander(t, in, 71)
		l.land(30, 20)
		p := proc{bin: buildProg(t, lakePkg), args: []string{"-input", in, "-lake", lake, "-checkpoint", cp, "-trigger", "available-now", "-max-files-per-trigger", "1"}}
		cmd, done, stderr := startProc(t, p)
		waitCommits(t, cmd, done, stderr, cp, 1)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			t.Logf("after two SIGTERMs: %v, committed through %d", err, lastCommit(t, cp))
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("still running 30 s after two SIGTERMs:\n%s", stderr.String())
		}
		p.mustRun(t, "", 0)
		store, err := storage.OpenLocal(lake, storage.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		checkLake(t, store, l.all)
	})
	t.Run("pgtotals", func(t *testing.T) {
		dsn := testenv.PGURL(t)
		dir := t.TempDir()
		in, cp := filepath.Join(dir, "in"), filepath.Join(dir, "cp")
		l := newLander(t, in, 59)
		l.land(30, 20)
		p := proc{bin: buildProg(t, pgtotalsPkg), args: []string{"-input", in, "-checkpoint", cp, "-dsn", dsn, "-job", "term", "-create-table", "-max-files-per-trigger", "1", "-trigger", "10ms"}}
		stopWithSIGTERM(t, p, cp)
		p.args[len(p.args)-1] = "available-now"
		p.mustRun(t, "", 0)
		checkTotals(t, dsn, "term", cp, l.all)
	})
}

// stopWithSIGTERM starts p, sends SIGTERM once two batches have committed,
// and checks it exits 0 within 30 s with every planned batch committed. It
// returns the last committed batch.
func stopWithSIGTERM(t *testing.T, p proc, cp string) int64 {
	t.Helper()
	cmd, done, eb := startProc(t, p)
	waitCommits(t, cmd, done, eb, cp, 1)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, eb.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("still running 30 s after SIGTERM:\n%s", eb.String())
	}
	last, planned := lastCommit(t, cp), lastIn(t, filepath.Join(cp, "offsets"))
	if last != planned {
		t.Errorf("after SIGTERM batch %d is planned but the last commit is %d", planned, last)
	}
	t.Logf("stopped by SIGTERM after batch %d", last)
	return last
}

// startProc starts p without a fault spec; done receives Wait's result.
func startProc(t *testing.T, p proc) (*exec.Cmd, chan error, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(p.bin, p.args...)
	eb := &bytes.Buffer{}
	cmd.Stderr = eb
	cmd.Env = append(os.Environ(), p.env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done, eb
}

// waitCommits waits until batch n of the checkpoint cp has committed.
func waitCommits(t *testing.T, cmd *exec.Cmd, done chan error, stderr *bytes.Buffer, cp string, n int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for lastCommit(t, cp) < n {
		select {
		case err := <-done:
			t.Fatalf("exited (%v) before batch %d committed:\n%s", err, n, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("batch %d not committed in 60 s:\n%s", n, stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lastIn returns the largest numeric name in dir, or -1.
func lastIn(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	last := int64(-1)
	for _, e := range ents {
		if n, err := strconv.ParseInt(e.Name(), 10, 64); err == nil && n > last {
			last = n
		}
	}
	return last
}
