package engine

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/offsetlog"
)

// TestPurgeInStepsOfATenth pins the purge step: with a retention of 20
// the logs are purged every 2 batches, so after batch 50 (batch 49 purged
// up to 30, batch 50 is between steps) they hold batches 30 to 50: the
// retention and never fewer, at most a step more.
func TestPurgeInStepsOfATenth(t *testing.T) {
	cp := localStore(t)
	stream := ReadStream(newSeq(510, 10, 3)).GroupBy("key").Agg(batch.CountRows())
	if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(memsink.New("o")), WithTrigger(AvailableNow()), WithMinBatchesToRetain(20)); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{checkpoint.OffsetsDir, checkpoint.CommitsDir, checkpoint.ProgressDir} {
		ids, err := offsetlog.New[json.RawMessage](cp, dir).List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 21 || ids[0] != 30 || ids[20] != 50 {
			t.Errorf("%s keeps %v, want batches 30 to 50", dir, ids)
		}
	}
	if got := purgeStep(100); got != 10 {
		t.Errorf("purgeStep(100) = %d, want 10", got)
	}
	if got := purgeStep(7); got != 1 {
		t.Errorf("purgeStep(7) = %d, want 1", got)
	}
}
