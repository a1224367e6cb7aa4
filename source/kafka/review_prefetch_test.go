package kafka_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/source/kafka"
)

// TestReviewPrefetchThenRecordsDeleted: Prefetch's doc says it changes
// nothing that Read returns. Records of the planned range deleted
// (retention, DeleteRecords) between the prefetch and the Read: a Read
// without the prefetch reports the gap (DataLossError, or skips it under
// WithFailOnDataLoss(false)); so must a Read after it, or the batch's
// first run and its re-run after a crash (which has no prefetch) read
// different rows.
func TestReviewPrefetchThenRecordsDeleted(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"pay": 1})
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, rec("pay", 0, "", fmt.Sprint("v", i)))
	}
	produce(t, c, recs...)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newSource(t, c, mem, kafka.WithTopics("pay"), kafka.WithFailOnDataLoss(false))
	start := must(t)(src.InitialOffset(ctx))
	end := must(t)(src.LatestOffset(ctx, start))
	src.Prefetch(ctx, start, end)
	trim(t, c, "pay", 0, 6)
	got, err := readRows(t, src, start, end)
	if err != nil {
		t.Fatal(err)
	}
	// The re-run: a fresh source, no prefetch.
	src2 := newSource(t, c, mem, kafka.WithTopics("pay"), kafka.WithFailOnDataLoss(false))
	want, err := readRows(t, src2, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(values(got), values(want)) {
		t.Fatalf("read after Prefetch: %v; the same range read again (no prefetch): %v", values(got), values(want))
	}
}
