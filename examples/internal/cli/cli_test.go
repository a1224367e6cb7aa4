package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/source/rate"
	"github.com/onceflow/onceflow/storage"
)

func newTestCommand(args ...string) (*Command, *bytes.Buffer) {
	var stderr bytes.Buffer
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &Command{name: "test", fs: fs, args: args, stderr: &stderr}, &stderr
}

func TestParseNamesEveryRequiredFlagWhenOneIsMissing(t *testing.T) {
	tests := map[string]struct {
		required []string
		args     []string
		want     string
	}{
		"one":               {[]string{"input"}, nil, "-input is required"},
		"two":               {[]string{"input", "checkpoint"}, []string{"-input", "x"}, "-input and -checkpoint are required"},
		"three":             {[]string{"input", "lake", "checkpoint"}, []string{"-input", "x", "-checkpoint", "y"}, "-input, -lake and -checkpoint are required"},
		"all given":         {[]string{"input", "checkpoint"}, []string{"-input", "x", "-checkpoint", "y"}, ""},
		"bad trigger after": {nil, []string{"-trigger", "bogus"}, `engine: invalid query: trigger "bogus" is not once, available-now or a duration such as 1s`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, _ := newTestCommand(tc.args...)
			c.fs.String("input", "", "")
			c.fs.String("lake", "", "")
			c.CheckpointFlag("", "")
			c.TriggerFlag()
			err := c.Parse(tc.required...)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Parse: %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCloseRunsNewestFirstAndJoinsEveryError(t *testing.T) {
	c, _ := newTestCommand()
	var order []int
	errA, errC := errors.New("a"), errors.New("c")
	c.Defer(func() error { order = append(order, 1); return errA })
	c.Defer(func() error { order = append(order, 2); return nil })
	c.Defer(func() error { order = append(order, 3); return errC })
	err := c.close()
	if want := []int{3, 2, 1}; !slices.Equal(order, want) {
		t.Errorf("close order %v, want %v", order, want)
	}
	if !errors.Is(err, errA) || !errors.Is(err, errC) {
		t.Errorf("close: %v, want both a and c", err)
	}
}

func TestLandSaysHowManyFilesItWroteAndNothingWithoutGenerate(t *testing.T) {
	dir := t.TempDir()
	c, stderr := newTestCommand("-generate", "2500")
	c.GenerateFlags("")
	if err := c.Parse(); err != nil {
		t.Fatal(err)
	}
	if err := c.Land(dir); err != nil {
		t.Fatal(err)
	}
	if want := "test: landed 3 generated files in " + dir + "\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}

	c, stderr = newTestCommand()
	c.GenerateFlags("")
	if err := c.Parse(); err != nil {
		t.Fatal(err)
	}
	if err := c.Land(t.TempDir()); err != nil || stderr.Len() != 0 {
		t.Errorf("Land without -generate: %v, stderr %q; want nothing", err, stderr.String())
	}
}

// failingSink fails every batch.
type failingSink struct{ *memsink.Sink }

var errBoom = errors.New("boom")

func (failingSink) AddBatch(context.Context, int64, *arrow.Schema, []arrow.RecordBatch) error {
	return errBoom
}

// lockedBuffer is a stderr that two queries' progress lines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestRunQueriesStopsTheOthersWhenOneFails(t *testing.T) {
	c, _ := newTestCommand("-trigger", "20ms")
	stderr := &lockedBuffer{}
	c.stderr = stderr
	c.TriggerFlag()
	if err := c.Parse(); err != nil {
		t.Fatal(err)
	}
	if c.Finite() {
		t.Fatal("a 20ms trigger reads as finite")
	}
	query := func(name string, sink engine.Sink) *engine.Query {
		src, err := rate.New(rate.WithRowsPerSecond(1000))
		if err != nil {
			t.Fatal(err)
		}
		cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q, err := c.Query(name, cp, engine.ReadStream(src), sink, func(engine.Progress) string { return "ok" })
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.RunQueries(ctx, query("good", memsink.New("good")), query("bad", failingSink{memsink.New("bad")}))
	if !errors.Is(err, errBoom) {
		t.Fatalf("RunQueries: %v, want the failing query's error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("RunQueries returned only at the deadline")
	}
	if out := stderr.String(); strings.Contains(out, "test-bad: batch") {
		t.Errorf("a batch of test-bad committed: %q", out)
	}
}

func TestFiniteTriggers(t *testing.T) {
	for trig, want := range map[string]bool{"once": true, "available-now": true, "1s": false} {
		c, _ := newTestCommand("-trigger", trig)
		c.TriggerFlag()
		if err := c.Parse(); err != nil {
			t.Fatal(err)
		}
		if c.Finite() != want {
			t.Errorf("-trigger %s: Finite %t, want %t", trig, !want, want)
		}
	}
}
