package monitor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/engine"
)

// TestStatusListsTasks: with WithTasks, /status carries what the function
// returns (a scale-out worker's tasks) under "tasks"; without it the
// member is absent, so the document is unchanged for a single query.
func TestStatusListsTasks(t *testing.T) {
	type task struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	owned := []task{{"0", "running"}, {"5", "retrying"}}
	for name, tc := range map[string]struct {
		opts []Option
		want string
	}{
		"with tasks":    {[]Option{WithTasks(func() any { return owned })}, `"tasks":[{"id":"0","state":"running"},{"id":"5","state":"retrying"}]`},
		"without tasks": {nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			l := New(tc.opts...)
			if err := l.OnQueryStart(engine.QueryInfo{ID: "q", RunID: "r", Name: "settle-t0", Trigger: engine.Every(time.Second)}); err != nil {
				t.Fatal(err)
			}
			defer l.OnQueryStop(nil)
			b, err := json.Marshal(l.status())
			if err != nil {
				t.Fatal(err)
			}
			got := string(b)
			if tc.want == "" && strings.Contains(got, `"tasks"`) {
				t.Errorf("/status has tasks without WithTasks: %s", got)
			}
			if tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("/status = %s, want it to hold %s", got, tc.want)
			}
		})
	}
}
