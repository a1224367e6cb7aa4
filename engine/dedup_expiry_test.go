package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/onceflow/onceflow/memsink"
)

// Regression: a deduplicated key that expired in batch N and got a repeat
// in batch N went to the state commit as both an upsert and a delete, which
// the store refuses, so the query stuck on that batch for good; now the
// batch commits and emits what it should.
//
// Before the fix: DropDuplicatesWithinWatermark. A key whose state expires in
// batch N (first event time + delay < watermark) and that also gets a row
// in batch N (a repeat stamped later, so not late) is both changed and
// evicted: finishPartition passes it to statestore Commit in the upserts
// (gb.Changes, taken before the eviction) and in the deletes, and Commit
// refuses a key that appears twice. The batch fails, and since a re-run is
// identical, the query can never get past it.
func TestDedupKeyRepeatedInTheBatchItExpiresIn(t *testing.T) {
	script := [][]evRow{
		{{"k1", 10, 1}}, // k1 first seen at 10 s; watermark after: 5 s
		{{"k2", 30, 2}}, // watermark after: 25 s (k1 expires when 10+5 < watermark)
		{{"k1", 26, 3}}, // a repeat of k1 stamped 26 s: not late (26 >= 25), but k1 expires in this batch
		{{"k3", 40, 4}}, // the query must go on
	}
	sink := memsink.New("out")
	stream := ReadStream(&scriptSource{batches: script}).
		WithWatermark("ts", 5*time.Second).
		DropDuplicatesWithinWatermark("key").Stream
	if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(1)); err != nil {
		t.Fatalf("query stuck: %v", err)
	}
	got := map[string]int{}
	for _, r := range sink.All() {
		got[r[0].(string)]++
	}
	if got["k2"] != 1 || got["k3"] != 1 || got["k1"] < 1 {
		t.Fatalf("emitted %v", fmt.Sprint(got))
	}
}
