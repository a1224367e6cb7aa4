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

// kafkaFault is one armed broker fault: requests of key that match get
// code in their response, or, with code nil, their connection closed.
type kafkaFault struct {
	key   kmsg.Key
	match func(kmsg.Request) bool
	code  *kerr.Error
}

func (f kafkaFault) String() string {
	if f.code == nil {
		return f.key.Name() + " dropped"
	}
	return f.key.Name() + " " + f.code.Message
}

// TestKafkaFaults runs the four-sink program against a broker living in
// the test process (kfake), which fails the program's Produce (the
// transactional sink's), EndTxn and Fetch (the source's) requests through
// ControlKey: with retriable error codes and dropped connections (all
// three request kinds armed in one run), and with a fatal code (one run
// per request kind). The program either rides through (the client
// retries) or stops with an error naming the broker's error; after the
// fault clears, a restart finishes and every sink reconciles.
func TestKafkaFaults(t *testing.T) {
	t.Parallel() // its own broker, checkpoint and outputs; see doc.go
	c := testenv.Kafka(t, map[string]int32{"payments": 4, "settlements": 4})
	onceflow, prog := programs(t)
	h := newHarness(t, onceflow, prog, c.Addrs()[0], 71, sinkKafka, sinkLake, sinkPG, sinkLines)
	h.extra = []string{"-max-offsets-per-trigger", "60"}
	cl := h.client()
	table := newFaultTable(t, fmt.Sprintf("go test -race ./tests/chaos/ -run TestKafkaFaults -chaos.rounds=%d", *chaosRounds))
	fake := c.Fake()
	all := func(kmsg.Request) bool { return true }
	cases := []struct {
		kind   string
		faults []kafkaFault
	}{
		{"Kafka retriable errors at Produce, EndTxn, Fetch", []kafkaFault{
			{kmsg.Produce, transactional, kerr.NotLeaderForPartition},
			{kmsg.EndTxn, all, kerr.CoordinatorNotAvailable},
			{kmsg.Fetch, all, kerr.NotLeaderForPartition},
		}},
		{"Kafka connections dropped at Produce, EndTxn, Fetch", []kafkaFault{
			{kmsg.Produce, transactional, nil},
			{kmsg.EndTxn, all, nil},
			{kmsg.Fetch, all, nil},
		}},
		{"Kafka fatal error at Produce (INVALID_RECORD)", []kafkaFault{{kmsg.Produce, transactional, kerr.InvalidRecord}}},
		{"Kafka fatal error at EndTxn (INVALID_TXN_STATE)", []kafkaFault{{kmsg.EndTxn, all, kerr.InvalidTxnState}}},
		{"Kafka fatal error at Fetch (UNKNOWN_SERVER_ERROR)", []kafkaFault{{kmsg.Fetch, all, kerr.UnknownServerError}}},
	}
	for _, tc := range cases {
		row := table.row(tc.kind, h.sinks)
		for range *chaosRounds {
			var armed atomic.Bool
			injected := make([]atomic.Int64, len(tc.faults))
			for i, f := range tc.faults {
				var seen atomic.Int64
				skip, times := int64(1+h.rng.IntN(4)), int64(1+h.rng.IntN(2))
				fake.ControlKey(f.key.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
					fake.KeepControl()
					if !armed.Load() || !f.match(req) || seen.Add(1) <= skip || injected[i].Load() >= times {
						return nil, nil, false
					}
					injected[i].Add(1)
					if f.code == nil {
						return nil, errors.New("chaos: drop the connection"), true
					}
					return testenv.KafkaFailResponse(req, f.code.Code), nil, true
				})
			}
			h.produce(cl, 150+h.rng.IntN(150))
			armed.Store(true)
			r := h.start(runSpec{})
			armed.Store(false)
			var n int64
			var got []string
			for i, f := range tc.faults {
				n += injected[i].Load()
				got = append(got, fmt.Sprintf("%s ×%d", f, injected[i].Load()))
			}
			row.runs++
			row.injected += int(n)
			switch {
			case r.killed:
				t.Fatalf("%s: killed without a kill:\n%s", tc.kind, r.stderr)
			case r.err == nil:
				row.rode++
				t.Logf("%s (%s): rode through in %s", tc.kind, strings.Join(got, ", "), r.took.Round(time.Millisecond))
			default:
				row.stopped++
				msg := lastError(r.stderr)
				named := false
				for _, f := range tc.faults {
					want := []string{"eof", "connection", "broken pipe", "closed"} // a dropped connection
					if f.code != nil {
						want = []string{strings.ToLower(f.code.Message)}
					}
					for _, w := range want {
						named = named || strings.Contains(strings.ToLower(msg), w)
					}
				}
				if !named {
					t.Errorf("%s: the run stopped with an error that does not name the broker's error: %s", tc.kind, msg)
				}
				t.Logf("%s (%s): stopped after %s: %s", tc.kind, strings.Join(got, ", "), r.took.Round(time.Millisecond), msg)
				if r := h.start(runSpec{}); r.err != nil || r.killed {
					t.Fatalf("%s: the restart without faults did not finish: %v\n%s", tc.kind, r.err, r.stderr)
				}
			}
		}
		row.settle(h)
	}
}
