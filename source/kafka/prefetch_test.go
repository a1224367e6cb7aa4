package kafka_test

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/source/kafka"
)

// TestPrefetchChangesNothingRead pins that Prefetch only makes Read
// cheaper: a Read after a Prefetch of its range, after a Prefetch of
// another range, and after a Prefetch whose range is too large to hold
// returns exactly the rows of a Read without one, across transaction
// markers and aborted records, read_committed and read_uncommitted.
func TestPrefetchChangesNothingRead(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"payments": 2})
	produce(t, c, rec("payments", 0, "k", "p1"), rec("payments", 0, "k", "p2"))
	produceTxn(t, c, "tx-a", true, rec("payments", 0, "k", "a1"), rec("payments", 1, "k", "a2"))
	produceTxn(t, c, "tx-b", false, rec("payments", 0, "k", "b1"), rec("payments", 0, "k", "b2"))
	produce(t, c, rec("payments", 0, "k", "p3"), rec("payments", 1, "k", "p4"))
	var fetches atomic.Int64
	c.Fake().ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		fetches.Add(1)
		return nil, nil, false
	})
	for _, tc := range []struct {
		name string
		opts []kafka.Option
	}{
		{"read_committed", nil},
		{"read_uncommitted", []kafka.Option{kafka.WithReadUncommitted()}},
		{"too large to prefetch", []kafka.Option{kafka.WithRowsPerRecord(2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			src := newSource(t, c, mem, append(tc.opts, kafka.WithTopics("payments"))...)
			start := must(t)(src.InitialOffset(ctx))
			end := must(t)(src.LatestOffset(ctx, start))
			want, err := readRows(t, src, start, end)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				t.Fatal("nothing read")
			}
			src.Prefetch(ctx, start, end)
			before := fetches.Load()
			got, err := readRows(t, src, start, end)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("after Prefetch: %v, want %v", got, want)
			}
			// Each partition's range fits one answer: the Read after the
			// prefetch sends no fetch of its own (unless too large).
			if n := fetches.Load() - before; tc.name != "too large to prefetch" && n != 0 {
				t.Errorf("the Read after Prefetch sent %d fetches, want 0", n)
			}
			// A prefetch of another range is not used for this one.
			src.Prefetch(ctx, end, end)
			src.Prefetch(ctx, start, start)
			if got, err = readRows(t, src, start, end); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("after Prefetch of another range: %v %v, want %v", got, err, want)
			}
			// A prefetch is used once: the next Read fetches again.
			src.Prefetch(ctx, start, end)
			for range 2 {
				if got, err = readRows(t, src, start, end); err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("read after a used Prefetch: %v %v, want %v", got, err, want)
				}
			}
		})
	}
}
