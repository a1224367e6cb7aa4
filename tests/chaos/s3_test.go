package chaos

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/s3fault"
	"github.com/onceflow/onceflow/internal/testenv"
)

var s3Stops = flag.Bool("chaos.s3-stops", false, "TestS3Faults: also run, for every kind, the fault that outlasts the SDK's retries (by default only for the lost response)")

// TestS3Faults runs the four-sink program with its checkpoint and its
// file-sink table on S3 (versitygw), reached through a fault proxy
// (internal/s3fault) that answers 500 InternalError and 503 SlowDown,
// resets connections in the middle of a body, stalls a request 10 s, and
// performs PUTs and then loses their answers. Each kind gets a run in
// which the SDK's retries mostly ride the faults through and a run in
// which one request fails more often than the SDK retries, so the query
// stops with an error naming the S3 failure (by default for the lost
// response only; -chaos.s3-stops for every kind). Then the fault clears, a
// restart finishes, and every sink reconciles with the input.
func TestS3Faults(t *testing.T) {
	t.Parallel() // its own broker, checkpoint and outputs; see doc.go
	loc := testenv.S3Bucket(t)
	proxy, err := s3fault.Start(os.Getenv(testenv.S3EnvVar), 41)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	onceflow, prog := programs(t)
	broker := startBroker(t, onceflow, "payments:4,settlements:4")
	h := newHarness(t, onceflow, prog, broker, 41, sinkKafka, sinkLake, sinkPG, sinkLines)
	h.extra = []string{"-max-offsets-per-trigger", "60"}
	q := url.Values{"endpoint": {proxy.URL()}, "path_style": {"true"}}.Encode()
	h.cpLoc = "s3://" + loc.Bucket + "/checkpoint?" + q
	h.lakeLoc = "s3://" + loc.Bucket + "/lake?" + q
	h.env = loc.Env
	cl := h.client()
	table := newFaultTable(t, fmt.Sprintf("go test -race ./tests/chaos/ -run TestS3Faults -chaos.rounds=%d -chaos.s3-stops=%v", *chaosRounds, *s3Stops))

	// Each kind's first run has the faults the SDK's three attempts
	// mostly ride through (a request that draws the fault on every
	// attempt stops the run); persistent fails one commit marker's every
	// attempt.
	persistent := func(a s3fault.Action) []s3fault.Rule {
		return []s3fault.Rule{{Method: "PUT", Key: "checkpoint/commits/*", Nth: 2, Times: 3, Action: a}}
	}
	cases := []struct {
		kind  string
		runs  [][]s3fault.Rule
		names []string // what a stop's message must name (any of)
	}{
		{"S3 500 InternalError", [][]s3fault.Rule{
			{{Prob: 0.05, Times: 8, Action: s3fault.InternalError}},
			persistent(s3fault.InternalError),
		}, []string{"InternalError", "500"}},
		{"S3 503 SlowDown", [][]s3fault.Rule{
			{{Prob: 0.05, Times: 8, Action: s3fault.SlowDown}},
			persistent(s3fault.SlowDown),
		}, []string{"SlowDown", "503"}},
		{"S3 connection reset mid-body", [][]s3fault.Rule{
			{{Method: "PUT", Prob: 0.05, Times: 6, Action: s3fault.ResetBody}, {Method: "GET", Prob: 0.05, Times: 2, Action: s3fault.ResetBody}},
			persistent(s3fault.ResetBody),
		}, []string{"connection reset", "EOF", "broken pipe"}},
		{"S3 request stalled 10s", [][]s3fault.Rule{
			{{Method: "PUT", Nth: 6, Action: s3fault.Stall}},
		}, nil},
		{"S3 PUT done, response lost", [][]s3fault.Rule{
			// The put-if-absent of a plan and of a file-sink log entry
			// lose their answers: the retry meets 412 and must find its
			// own bytes there.
			{{Method: "PUT", Key: "checkpoint/offsets/*", Nth: 2, Action: s3fault.LoseResponse},
				{Method: "PUT", Key: "lake/_onceflow_log/*", Nth: 2, Action: s3fault.LoseResponse},
				{Method: "PUT", Prob: 0.05, Times: 6, Action: s3fault.LoseResponse}},
			persistent(s3fault.LoseResponse),
		}, []string{"connection reset", "EOF"}},
	}
	for _, c := range cases {
		row := table.row(c.kind, h.sinks)
		for i, rules := range slices.Repeat(c.runs, *chaosRounds) {
			if i%len(c.runs) > 0 && !*s3Stops && !strings.Contains(c.kind, "response lost") {
				continue
			}
			h.produce(cl, 120+h.rng.IntN(120))
			before := len(proxy.Events())
			proxy.SetRules(rules...)
			r := h.start(runSpec{})
			proxy.SetRules()
			n := len(proxy.Events()) - before
			row.runs++
			row.injected += n
			switch {
			case r.killed:
				t.Fatalf("%s: killed without a kill:\n%s", c.kind, r.stderr)
			case r.err == nil:
				row.rode++
				t.Logf("%s (%v): %d faults, rode through in %s", c.kind, rules, n, r.took.Round(time.Millisecond))
			default:
				row.stopped++
				msg := lastError(r.stderr)
				named := false
				for _, w := range c.names {
					named = named || strings.Contains(msg, w)
				}
				if !named || !strings.Contains(msg, "s3store: ") {
					t.Errorf("%s: the run stopped with an error that does not name the S3 failure and the object (want s3store: and one of %q): %s", c.kind, c.names, msg)
				}
				if strings.Contains(msg, "onceflow-test-secret") || strings.Contains(msg, "onceflow-test-access") {
					t.Errorf("%s: the error shows the S3 credentials", c.kind)
				}
				t.Logf("%s (%v): %d faults (%v), stopped after %s: %s", c.kind, rules, n, proxy.Events()[before:], r.took.Round(time.Millisecond), msg)
				if r := h.start(runSpec{}); r.err != nil || r.killed {
					t.Fatalf("%s: the restart without faults did not finish: %v\n%s", c.kind, r.err, r.stderr)
				}
			}
		}
		row.settle(h)
	}
	t.Logf("%d requests through the proxy", proxy.Requests())
}
