package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/source/kafka"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestAvailableNowAndStats(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"a": 2})
	produce(t, c, rec("a", 0, "", "1"), rec("a", 0, "", "2"), rec("a", 1, "", "3"))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newSource(t, c, mem, kafka.WithTopics("a"), kafka.WithMaxOffsetsPerTrigger(2))
	start := must(t)(src.InitialOffset(ctx))
	if err := src.PrepareAvailableNow(ctx); err != nil {
		t.Fatal(err)
	}
	produce(t, c, rec("a", 1, "", "late"))
	end := must(t)(src.LatestOffset(ctx, start))
	if offs(t, end) != `{"a":{"0":1,"1":1}}` {
		t.Fatalf("end %s", end)
	}
	want := []kafka.PartitionStats{
		{Topic: "a", Partition: 0, Start: 0, End: 1, Latest: 2, Lag: 1},
		{Topic: "a", Partition: 1, Start: 0, End: 1, Latest: 2, Lag: 1},
	}
	if got := src.Stats().Partitions; !reflect.DeepEqual(got, want) {
		t.Fatalf("stats %+v", got)
	}
	end2 := must(t)(src.LatestOffset(ctx, end))
	if offs(t, end2) != `{"a":{"0":2,"1":1}}` {
		t.Fatalf("end2 %s: the record produced after PrepareAvailableNow must wait", end2)
	}
	if again := must(t)(src.LatestOffset(ctx, end2)); string(again) != string(end2) {
		t.Fatalf("available-now run does not end: %s", again)
	}
}

func TestSASL(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"s": 1}, kfake.EnableSASL(), kfake.Superuser("PLAIN", "app", "secret"))
	good := newSource(t, c, memory.DefaultAllocator, kafka.WithTopics("s"),
		kafka.WithSASL(plain.Auth{User: "app", Pass: "secret"}.AsMechanism()))
	if got := must(t)(good.InitialOffset(ctx)); offs(t, got) != `{"s":{"0":0}}` {
		t.Fatalf("initial %s", got)
	}
	bad := newSource(t, c, memory.DefaultAllocator, kafka.WithTopics("s"),
		kafka.WithSASL(plain.Auth{User: "app", Pass: "wrong"}.AsMechanism()))
	_, err := bad.InitialOffset(ctx)
	if err == nil {
		t.Fatal("wrong password accepted")
	}
	if errors.Is(err, kafka.ErrDataLoss) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("err = %v", err)
	}
}

// TestFetchErrorsAreRetried: a leader change answered to a fetch (kfake
// ControlKey) is retried after a metadata refresh, and the rows are the
// same.
func TestFetchErrorsAreRetried(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"f": 1})
	produce(t, c, rec("f", 0, "", "1"), rec("f", 0, "", "2"))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newSource(t, c, mem, kafka.WithTopics("f"))
	var hits atomic.Int32
	c.Fake().ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if hits.Add(1) > 2 {
			return nil, nil, false
		}
		c.Fake().KeepControl()
		fr := req.(*kmsg.FetchRequest)
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range fr.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	rows, err := readRows(t, src, json.RawMessage(`{"f":{"0":0}}`), json.RawMessage(`{"f":{"0":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := values(rows); !reflect.DeepEqual(got, []string{"1", "2"}) || hits.Load() < 3 {
		t.Fatalf("values %v after %d fetches", got, hits.Load())
	}
}
