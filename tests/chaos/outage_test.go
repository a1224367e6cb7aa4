package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/audit"
	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
)

// TestOutage kills the program after a batch's Kafka transaction began
// (records and marker produced, not committed) and keeps it down longer
// than the transaction timeout, while payments keep arriving. The broker
// aborts the open transaction; the restarted program re-runs the batch
// from offsets/N and commits it in a new transaction: nothing is lost and
// nothing is doubled.
func TestOutage(t *testing.T) {
	faulttest.Require(t)
	const timeout = 2 * time.Second
	onceflow, prog := programs(t)
	broker := startBroker(t, onceflow, "payments:4,settlements:4")
	h := newHarness(t, onceflow, prog, broker, 11, sinkKafka, sinkLines)
	h.extra = []string{"-max-offsets-per-trigger", "100", "-txn-timeout", timeout.String()}
	ctx := context.Background()
	cl := h.client()

	h.produce(cl, 250)
	if killed, stderr := h.run("", 0); killed {
		t.Fatalf("first run killed:\n%s", stderr)
	}
	h.produce(cl, 250)
	killed, stderr := h.run(fault.KafkaSinkAfterProduce+"@2", 0)
	if !killed || !strings.Contains(stderr, "onceflow-fault: "+fault.KafkaSinkAfterProduce) {
		t.Fatalf("not killed at %s:\n%s", fault.KafkaSinkAfterProduce, stderr)
	}
	// Down for longer than the transaction timeout; payments keep coming.
	stop := h.keepProducing(10, 100*time.Millisecond)
	time.Sleep(timeout + 1500*time.Millisecond)
	stop()
	// The broker aborted the open transaction: every partition's last
	// stable offset caught up with its high watermark.
	adm := kadm.NewClient(h.client())
	hwm, err := adm.ListEndOffsets(ctx, "settlements")
	if err != nil {
		t.Fatal(err)
	}
	lso, err := adm.ListCommittedOffsets(ctx, "settlements")
	if err != nil {
		t.Fatal(err)
	}
	hwm.Each(func(o kadm.ListedOffset) {
		if l, _ := lso.Lookup(o.Topic, o.Partition); l.Offset != o.Offset {
			t.Errorf("settlements/%d: last stable offset %d, high watermark %d: the transaction is still open after its timeout", o.Partition, l.Offset, o.Offset)
		}
	})
	rep := h.audit(ctx, sinkKafka)
	if !rep.OK() || rep.MatchedBatch != rep.LastCommitted || rep.Pending != rep.LastCommitted+1 {
		t.Fatalf("during the outage the Kafka output must hold exactly the committed batches (%d), not the open transaction of batch %d: %+v",
			rep.LastCommitted, rep.Pending, rep)
	}
	down := rep.LastCommitted
	if killed, stderr := h.run("", 0); killed {
		t.Fatalf("restart killed:\n%s", stderr)
	}
	for _, s := range h.sinks {
		rep := h.audit(ctx, s)
		if !rep.OK() || rep.InputRows != int64(h.sentCount()) || rep.LastCommitted <= down {
			t.Errorf("%s sink after the outage: %d differences, %d of %d payments, batch %d (was %d): %+v",
				s, rep.Differences(), rep.InputRows, h.sentCount(), rep.LastCommitted, down, rep.Suspects)
		}
	}
	t.Logf("killed at %s in batch %d, down %s (transaction timeout %s); after restart batch %d committed, %d payments reconciled",
		fault.KafkaSinkAfterProduce, down+1, timeout+1500*time.Millisecond, timeout, h.audit(ctx, sinkKafka).LastCommitted, h.sentCount())
}

// TestBrokenGuard proves the audit sees the bug it exists for: with
// -broken-guard the foreachBatch function no longer skips a batch it
// already applied, so a kill between the sinks and commits/N makes the
// re-run append that batch twice. The audit (API and command) must fail
// and name the batch; the same run with the guard in place must pass.
func TestBrokenGuard(t *testing.T) {
	faulttest.Require(t)
	onceflow, prog := programs(t)
	broker := startBroker(t, onceflow, "payments:4,settlements:4")
	for _, broken := range []bool{true, false} {
		name := map[bool]string{true: "broken", false: "guarded"}[broken]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, onceflow, prog, broker, 21, sinkLines)
			h.extra = []string{"-max-offsets-per-trigger", "100", "-payments-topic", "payments"}
			if broken {
				h.extra = append(h.extra, "-broken-guard")
			}
			ctx := context.Background()
			cl := h.client()
			h.produce(cl, 300)
			if killed, stderr := h.run(fault.EngineAfterSink+"@2", 0); !killed {
				t.Fatalf("not killed at %s:\n%s", fault.EngineAfterSink, stderr)
			}
			victim := h.audit(ctx, sinkLines).Pending
			if killed, stderr := h.run("", 0); killed {
				t.Fatalf("restart killed:\n%s", stderr)
			}
			rep := h.audit(ctx, sinkLines)
			code, out := h.auditCLI(sinkLines)
			if !broken {
				if !rep.OK() || code != 0 {
					t.Fatalf("guarded sink: %d differences, onceflow audit exit %d:\n%s", rep.Differences(), code, out)
				}
				return
			}
			if rep.OK() {
				t.Fatalf("the audit passed a sink that applied batch %d twice: %+v", victim, rep)
			}
			found := false
			for _, s := range rep.Suspects {
				found = found || (s.Link == audit.SuspectDoubleApplied && s.Batch == victim)
			}
			if !found {
				t.Errorf("suspects %+v, want %q naming batch %d", rep.Suspects, audit.SuspectDoubleApplied, victim)
			}
			if code != 1 || !strings.Contains(out, audit.SuspectDoubleApplied) {
				t.Errorf("onceflow audit exit %d, want 1 naming %q:\n%s", code, audit.SuspectDoubleApplied, out)
			}
			t.Logf("onceflow audit on the broken sink (exit %d):\n%s", code, out)
		})
	}
}
