package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/memsink"
)

// ID on what DropDuplicates returns names the operator: its state folder
// and its restart entry. The id belongs to the deduplication step itself,
// so a later step cannot make it silently do nothing, as DedupID did when
// the dedup was not the last step.
func TestDropDuplicatesID(t *testing.T) {
	base := ReadStream(&orderSource{batches: orders[:1]}).DropDuplicates("key")
	for _, tc := range []struct {
		name   string
		stream *Stream
		id     string
		rows   []string
	}{
		{"default id", base.Stream, "dedup-key", []string{"a 1 3 2", "b 3 10 1"}},
		{"named", base.ID("first-order"), "first-order", []string{"a 1 3 2", "b 3 10 1"}},
		{"named, then more steps", base.ID("first-order").Drop("ts", "qty"), "first-order", []string{"a 3", "b 10"}},
		{"more steps on the unnamed one", base.Where(batch.Gt(batch.Col("price"), batch.Lit(5))), "dedup-key", []string{"b 3 10 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := localStore(t)
			sink := memsink.New("out")
			q, err := runQuery(t, tc.stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(1))
			if err != nil {
				t.Fatal(err)
			}
			if got := rowStrings(sink.All()); !slices.Equal(got, tc.rows) {
				t.Errorf("rows %v, want %v", got, tc.rows)
			}
			if p := q.LastProgress(); p == nil || len(p.StateOperators) != 1 || p.StateOperators[0].OperatorID != tc.id {
				t.Fatalf("progress %+v, want one operator %q", p, tc.id)
			}
			names, err := cp.List(context.Background(), checkpoint.StateRoot+"/"+tc.id+"/")
			if err != nil || len(names) == 0 {
				t.Errorf("state folder of %q: %v, %v", tc.id, names, err)
			}
		})
	}
}
