package chaos

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/testenv"
)

// TestKafkaFaults runs the four-sink program against a broker living in
// the test process (kfake), which fails the program's Produce (the
// transactional sink's), EndTxn and Fetch (the source's) requests through
// ControlKey: with a retriable error code, with a fatal one, and by
// dropping the connection. The program either rides through (the client
// retries) or stops with an error naming the broker's error; after the
// fault clears, a restart finishes and every sink reconciles.
func TestKafkaFaults(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"payments": 4, "settlements": 4})
	onceflow, prog := programs(t)
	h := newHarness(t, onceflow, prog, c.Addrs()[0], 71, sinkKafka, sinkLake, sinkPG, sinkLines)
	h.extra = []string{"-max-offsets-per-trigger", "60"}
	cl := h.client()
	table := newFaultTable(t, "go test -race ./tests/chaos/ -run TestKafkaFaults")
	fake := c.Fake()
	all := func(kmsg.Request) bool { return true }
	cases := []struct {
		key   kmsg.Key
		match func(kmsg.Request) bool
		codes []*kerr.Error // retriable, fatal; nil drops the connection
	}{
		{kmsg.Produce, transactional, []*kerr.Error{kerr.NotLeaderForPartition, kerr.InvalidRecord, nil}},
		{kmsg.EndTxn, all, []*kerr.Error{kerr.CoordinatorNotAvailable, kerr.InvalidTxnState, nil}},
		{kmsg.Fetch, all, []*kerr.Error{kerr.NotLeaderForPartition, kerr.UnknownServerError, nil}},
	}
	for _, tc := range cases {
		for _, code := range tc.codes {
			what := "connection dropped"
			if code != nil {
				what = code.Message
			}
			kind := fmt.Sprintf("Kafka %s: %s", tc.key.Name(), what)
			row := table.row(kind, h.sinks)
			var armed atomic.Bool
			var seen, injected atomic.Int64
			skip, times := int64(1+h.rng.IntN(4)), int64(1+h.rng.IntN(2))
			fake.ControlKey(tc.key.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				if !armed.Load() || !tc.match(req) || seen.Add(1) <= skip || injected.Load() >= times {
					return nil, nil, false
				}
				injected.Add(1)
				if code == nil {
					return nil, errors.New("chaos: drop the connection"), true
				}
				return testenv.KafkaFailResponse(req, code.Code), nil, true
			})
			h.produce(cl, 150+h.rng.IntN(150))
			armed.Store(true)
			r := h.start(runSpec{})
			armed.Store(false)
			row.runs++
			row.injected += int(injected.Load())
			switch {
			case r.killed:
				t.Fatalf("%s: killed without a kill:\n%s", kind, r.stderr)
			case r.err == nil:
				row.rode++
				t.Logf("%s: %d faults, rode through in %s", kind, injected.Load(), r.took.Round(time.Millisecond))
			default:
				row.stopped++
				msg := lastError(r.stderr)
				if code != nil && !strings.Contains(strings.ToLower(msg), strings.ToLower(what)) {
					t.Errorf("%s: the run stopped with an error that does not name the broker's error: %s", kind, msg)
				}
				t.Logf("%s: %d faults, stopped after %s: %s", kind, injected.Load(), r.took.Round(time.Millisecond), msg)
				if r := h.start(runSpec{}); r.err != nil || r.killed {
					t.Fatalf("%s: the restart without faults did not finish: %v\n%s", kind, r.err, r.stderr)
				}
			}
			row.settle(h)
		}
	}
}
