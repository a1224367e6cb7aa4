package kafkasink

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
)

const crashBrokersEnv = "KAFKASINK_CRASH_BROKERS"

// TestCrashHelper is the child process of TestCrashAtFaultPoints: it adds
// batch 0 and is killed at the armed fault point.
func TestCrashHelper(t *testing.T) {
	addrs := os.Getenv(crashBrokersEnv)
	if addrs == "" {
		t.Skip("child process of TestCrashAtFaultPoints")
	}
	s, err := New(WithBrokers(strings.Split(addrs, ",")...), WithTopic("out"), WithKeyColumn("id"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx, "crash"); err != nil {
		t.Fatal(err)
	}
	rec := payments(t, memory.NewGoAllocator(), "b0", 3)
	if err := s.AddBatch(ctx, 0, paySchema, []arrow.RecordBatch{rec}); err != nil {
		t.Fatal(err)
	}
	t.Fatal("the fault point did not kill the process")
}

// TestCrashAtFaultPoints SIGKILLs a real process at each fault point of
// AddBatch(0), then re-runs batch 0 in a fresh sink (as the engine does on
// recovery) and checks that a read_committed consumer sees it once.
func TestCrashAtFaultPoints(t *testing.T) {
	faulttest.Require(t)
	for _, point := range []string{fault.KafkaSinkAfterProduce, fault.KafkaSinkAfterCommit} {
		t.Run(point, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			c := testenvKafka(t)
			cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashHelper$", "-test.count", "1")
			cmd.Env = append(os.Environ(), crashBrokersEnv+"="+strings.Join(c.Addrs(), ","), fault.EnvVar+"="+point)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "onceflow-fault: "+point) {
				t.Fatalf("child did not die at %s: %v\n%s", point, err, out)
			}
			b0 := payments(t, mem, "b0", 3)
			defer b0.Release()
			s := newSink(t, c)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.Start(ctx, "crash"); err != nil {
				t.Fatal(err)
			}
			if err := add(s, 0, b0); err != nil {
				t.Fatal(err)
			}
			wantSkipped := int64(0)
			if point == fault.KafkaSinkAfterCommit {
				wantSkipped = 1
			}
			if s.Skipped() != wantSkipped {
				t.Fatalf("skipped %d, want %d", s.Skipped(), wantSkipped)
			}
			counts, _ := visible(t, c)
			wantOnce(t, counts, "b0-0", "b0-1", "b0-2")
		})
	}
}
