package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// buildSigtest compiles engine/internal/sigtest.
func buildSigtest(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH; add it (e.g. /usr/local/go/bin) to run the signal tests")
	}
	bin := filepath.Join(t.TempDir(), "sigtest")
	cmd := exec.Command(goBin, "build", "-o", bin, "./internal/sigtest")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build sigtest: %v\n%s", err, out)
	}
	return bin
}

// sigRun starts the program and sends sig once per trigger, a prefix of a
// stdout line (a line may match several triggers in a row), and returns stdout, stderr and
// the exit code.
func sigRun(t *testing.T, bin, dir string, args []string, triggers []string, sig os.Signal) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-checkpoint", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		for len(triggers) > 0 && strings.HasPrefix(line, triggers[0]) {
			triggers = triggers[1:]
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // two signals must not merge while pending
		}
	}
	err = cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n"), stderr.String(), code
}

// checkpointBatches returns the batch ids of offsets/ and commits/.
func checkpointBatches(t *testing.T, dir string) (plans, commits []int64) {
	t.Helper()
	st, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if plans, err = offsetlog.New[OffsetsEntry](st, checkpoint.OffsetsDir).List(ctx); err != nil {
		t.Fatal(err)
	}
	if commits, err = offsetlog.New[CommitEntry](st, checkpoint.CommitsDir).List(ctx); err != nil {
		t.Fatal(err)
	}
	return plans, commits
}

func TestSignalsStopAndAbort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	bin := buildSigtest(t)

	t.Run("one signal finishes the batch in flight", func(t *testing.T) {
		dir := t.TempDir()
		stdout, stderr, code := sigRun(t, bin, dir, []string{"-sink-delay", "400ms"}, []string{"sink start 2"}, syscall.SIGTERM)
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if !strings.Contains(stdout, "sink done 2\ncommitted 2 recovered=false") || strings.Contains(stdout, "sink start 3") {
			t.Fatalf("batch 2 should finish and commit, and no batch 3 start:\n%s", stdout)
		}
		plans, commits := checkpointBatches(t, dir)
		if fmt.Sprint(plans) != "[0 1 2]" || fmt.Sprint(commits) != fmt.Sprint(plans) {
			t.Fatalf("after SIGTERM: offsets %v, commits %v; want a commit for every plan", plans, commits)
		}
		// A restart has nothing to re-run.
		stdout, stderr, code = sigRun(t, bin, dir, []string{"-sink-delay", "0s", "-trigger", "once"}, nil, nil)
		if code != 0 {
			t.Fatalf("restart exit %d: %s", code, stderr)
		}
		if stdout != "running\nsink start 3\nsink done 3\ncommitted 3 recovered=false" || strings.Contains(stderr, "recovering") {
			t.Fatalf("restart re-ran something:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
	})

	t.Run("a second signal aborts and the batch is re-run", func(t *testing.T) {
		dir := t.TempDir()
		stdout, stderr, code := sigRun(t, bin, dir, []string{"-sink-delay", "1s"}, []string{"sink start 1", "sink start 1"}, syscall.SIGINT)
		_ = stdout
		if code != 1 || !strings.Contains(stderr, "aborted by a second interrupt: ") || !strings.Contains(stderr, "context canceled") {
			t.Fatalf("exit %d, stderr:\n%s", code, stderr)
		}
		plans, commits := checkpointBatches(t, dir)
		if fmt.Sprint(plans) != "[0 1]" || fmt.Sprint(commits) != "[0]" {
			t.Fatalf("after abort: offsets %v, commits %v; want batch 1 planned and not committed", plans, commits)
		}
		stdout, stderr, code = sigRun(t, bin, dir, []string{"-sink-delay", "0s", "-trigger", "once"}, nil, nil)
		if code != 0 || !strings.Contains(stdout, "committed 1 recovered=true") || !strings.Contains(stderr, "recovering uncommitted batch") {
			t.Fatalf("restart after abort: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})
}

// In process, with a signal nobody else uses: the first stops after the
// batch in flight, a second aborts, and nothing is left running.
func TestRunUntilSignalInProcess(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, signals := range []int{1, 2} {
		t.Run(fmt.Sprint(signals, " signals"), func(t *testing.T) {
			cp := localStore(t)
			bs := &blockingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
			q, err := NewQuery(ReadStream(newSeq(1<<40, 10, 2)), WithCheckpoint(cp), WithSink(bs))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- RunUntilSignal(context.Background(), q, syscall.SIGUSR1) }()
			<-bs.entered // batch 0 is in the sink
			for range signals {
				if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if signals == 1 {
				close(bs.release)
			}
			err = <-done
			plans, commits := checkpointBatches(t, cp.(*storage.Local).Root())
			switch signals {
			case 1:
				if err != nil || fmt.Sprint(plans) != "[0]" || fmt.Sprint(commits) != "[0]" {
					t.Fatalf("one signal: %v, offsets %v, commits %v", err, plans, commits)
				}
			case 2:
				if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "aborted by a second user defined signal 1") || fmt.Sprint(commits) != "[]" {
					t.Fatalf("two signals: %v, commits %v", err, commits)
				}
			}
		})
	}
}
