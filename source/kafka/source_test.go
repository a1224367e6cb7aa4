package kafka_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/source/kafka"
)

// row is one emitted row, flattened for comparison.
type row struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       string
	Value     string // raw value, or the JSON columns formatted
	Headers   string
}

func newSource(t *testing.T, c *kafkadev.Cluster, mem memory.Allocator, opts ...kafka.Option) *kafka.Source {
	t.Helper()
	src, err := kafka.New(append([]kafka.Option{kafka.WithBrokers(c.Addrs()...), kafka.WithAllocator(mem)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// readRows reads [start, end) and flattens the rows.
func readRows(t *testing.T, src *kafka.Source, start, end json.RawMessage) ([]row, error) {
	t.Helper()
	var rows []row
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := src.Read(ctx, start, end, func(rec arrow.RecordBatch) error {
		if !rec.Schema().Equal(src.Schema()) {
			t.Fatalf("record schema %s differs from Schema() %s", rec.Schema(), src.Schema())
		}
		rows = append(rows, flatten(rec)...)
		return nil
	})
	return rows, err
}

func flatten(rec arrow.RecordBatch) []row {
	sc := rec.Schema()
	col := func(name string) arrow.Array { return rec.Column(sc.FieldIndices(name)[0]) }
	topic := col(kafka.ColTopic).(*array.String)
	part := col(kafka.ColPartition).(*array.Int32)
	off := col(kafka.ColOffset).(*array.Int64)
	key := col(kafka.ColKey).(*array.Binary)
	hdr := col(kafka.ColHeaders).(*array.List)
	var out []row
	for i := 0; i < int(rec.NumRows()); i++ {
		r := row{Topic: topic.Value(i), Partition: part.Value(i), Offset: off.Value(i)}
		if !key.IsNull(i) {
			r.Key = string(key.Value(i))
		}
		var vals []string
		for j, f := range sc.Fields() {
			switch f.Name {
			case kafka.ColKey, kafka.ColTopic, kafka.ColPartition, kafka.ColOffset, kafka.ColTimestamp, kafka.ColHeaders:
				continue
			}
			a := rec.Column(j)
			if b, ok := a.(*array.Binary); ok && !b.IsNull(i) {
				vals = append(vals, string(b.Value(i)))
				continue
			}
			vals = append(vals, a.ValueStr(i))
		}
		r.Value = strings.Join(vals, "|")
		start, end := hdr.ValueOffsets(i)
		st := hdr.ListValues().(*array.Struct)
		for k := start; k < end; k++ {
			r.Headers += st.Field(0).(*array.String).Value(int(k)) + "=" + string(st.Field(1).(*array.Binary).Value(int(k))) + ";"
		}
		out = append(out, r)
	}
	return out
}

func rec(topic string, p int32, key, value string) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(value)}
}

func values(rows []row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Value)
	}
	return out
}

func must(t *testing.T) func(json.RawMessage, error) json.RawMessage {
	return func(raw json.RawMessage, err error) json.RawMessage {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
}

// manual routes records to the partition they name.
var manual = kgo.RecordPartitioner(kgo.ManualPartitioner())

func produce(t *testing.T, c *kafkadev.Cluster, recs ...*kgo.Record) {
	t.Helper()
	cl := testenv.KafkaClient(t, c, manual)
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func produceTxn(t *testing.T, c *kafkadev.Cluster, id string, commit bool, recs ...*kgo.Record) {
	t.Helper()
	ctx := context.Background()
	cl := testenv.KafkaClient(t, c, manual, kgo.TransactionalID(id))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

func TestReadAcrossTransactionMarkers(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"payments": 2})
	produce(t, c, rec("payments", 0, "k", "p1"), rec("payments", 0, "k", "p2"))
	produceTxn(t, c, "tx-a", true, rec("payments", 0, "k", "a1"), rec("payments", 1, "k", "a2"))
	produceTxn(t, c, "tx-b", false, rec("payments", 0, "k", "b1"), rec("payments", 0, "k", "b2"))
	produce(t, c, rec("payments", 0, "k", "p3"))
	// The range ends with aborted records and their abort marker, which a
	// read_committed fetch never delivers.
	produceTxn(t, c, "tx-c", false, rec("payments", 0, "k", "c1"), rec("payments", 1, "k", "c2"))

	for _, tc := range []struct {
		name string
		opts []kafka.Option
		want []string
	}{
		{"read_committed", nil, []string{"p1", "p2", "a1", "p3", "a2"}},
		{"read_uncommitted", []kafka.Option{kafka.WithReadUncommitted()}, []string{"p1", "p2", "a1", "b1", "b2", "p3", "c1", "a2", "c2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			src := newSource(t, c, mem, append(tc.opts, kafka.WithTopics("payments"))...)
			start := must(t)(src.InitialOffset(ctx))
			if offs(t, start) != `{"payments":{"0":0,"1":0}}` {
				t.Fatalf("initial offset %s", start)
			}
			end := must(t)(src.LatestOffset(ctx, start))
			// Partition 0: p1 p2 a1 [commit] b1 b2 [abort] p3 c1 [abort] = 10;
			// partition 1: a2 [commit] c2 [abort] = 4.
			if offs(t, end) != `{"payments":{"0":10,"1":4}}` {
				t.Fatalf("end offset %s", end)
			}
			rows, err := readRows(t, src, start, end)
			if err != nil {
				t.Fatal(err)
			}
			if got := values(rows); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("values %v, want %v", got, tc.want)
			}
			// A second read of the same range is identical.
			again, err := readRows(t, src, start, end)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rows, again) {
				t.Fatalf("second read differs:\n%v\n%v", rows, again)
			}
			// Nothing new: LatestOffset returns start itself.
			if again := must(t)(src.LatestOffset(ctx, end)); string(again) != string(end) {
				t.Fatalf("LatestOffset(end) = %s, want %s", again, end)
			}
		})
	}
}

func TestOpenTransactionHoldsTheEnd(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"t": 1})
	produce(t, c, rec("t", 0, "", "before"))
	cl := testenv.KafkaClient(t, c, manual, kgo.TransactionalID("open"))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, rec("t", 0, "", "pending")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produce(t, c, rec("t", 0, "", "after"))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newSource(t, c, mem, kafka.WithTopics("t"))
	end := must(t)(src.LatestOffset(ctx, json.RawMessage(`{"t":{"0":0}}`)))
	if offs(t, end) != `{"t":{"0":1}}` {
		t.Fatalf("end %s: the last stable offset is 1 while the transaction is open", end)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	end2 := must(t)(src.LatestOffset(ctx, end))
	rows, err := readRows(t, src, end, end2)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(rows); !reflect.DeepEqual(got, []string{"pending", "after"}) {
		t.Fatalf("values %v", got)
	}
}

func TestNewPartitionsAndTopicsAtPlanning(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"ev-a": 1})
	adm := kadm.NewClient(testenv.KafkaClient(t, c))
	produce(t, c, rec("ev-a", 0, "", "a0"))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newSource(t, c, mem, kafka.WithTopicPattern(`^ev-`))
	start := must(t)(src.InitialOffset(ctx))
	end := must(t)(src.LatestOffset(ctx, start))
	if offs(t, end) != `{"ev-a":{"0":1}}` {
		t.Fatalf("end %s", end)
	}

	if _, err := adm.CreatePartitions(ctx, 2, "ev-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "ev-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "other"); err != nil {
		t.Fatal(err)
	}
	produce(t, c, rec("ev-a", 0, "", "a1"), rec("ev-a", 2, "", "a2-0"), rec("ev-b", 0, "", "b0"), rec("other", 0, "", "x"))
	next := must(t)(src.LatestOffset(ctx, end))
	// Partition 1 of ev-a is new but empty: it joins when it has records.
	if offs(t, next) != `{"ev-a":{"0":2,"2":1},"ev-b":{"0":1}}` {
		t.Fatalf("next %s", next)
	}
	// The partitions the start lacks begin at their log start offset.
	if got := froms(t, next); got != `{"ev-a":{"2":0},"ev-b":{"0":0}}` {
		t.Fatalf("next %s starts new partitions at %s", next, got)
	}
	rows, err := readRows(t, src, end, next)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(rows); !reflect.DeepEqual(got, []string{"a1", "a2-0", "b0"}) {
		t.Fatalf("values %v", got)
	}
	st := src.Stats()
	if len(st.Partitions) != 4 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDataLoss(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"pay": 1})
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, rec("pay", 0, "", fmt.Sprint("v", i)))
	}
	produce(t, c, recs...)
	adm := kadm.NewClient(testenv.KafkaClient(t, c))
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "pay", Partition: 0, At: 6})
	resp, err := adm.DeleteRecords(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		t.Fatal(err)
	}
	start := json.RawMessage(`{"pay":{"0":3}}`)
	end := json.RawMessage(`{"pay":{"0":10}}`)

	t.Run("fail", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src := newSource(t, c, mem, kafka.WithTopics("pay"))
		_, err := readRows(t, src, start, end)
		var dl *kafka.DataLossError
		if !errors.As(err, &dl) || !errors.Is(err, kafka.ErrDataLoss) {
			t.Fatalf("err = %v, want a DataLossError", err)
		}
		for _, want := range []string{`topic "pay"`, "partition 0", "expected offset 3", "available from offset 6"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	})
	t.Run("skip", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src := newSource(t, c, mem, kafka.WithTopics("pay"), kafka.WithFailOnDataLoss(false))
		rows, err := readRows(t, src, start, end)
		if err != nil {
			t.Fatal(err)
		}
		if got := values(rows); !reflect.DeepEqual(got, []string{"v6", "v7", "v8", "v9"}) {
			t.Fatalf("values %v", got)
		}
		if st := src.Stats(); st.DataLossGaps != 1 || st.SkippedOffsets != 3 {
			t.Fatalf("stats %+v, want 1 gap of 3 offsets", st)
		}
	})
	t.Run("deleted topic", func(t *testing.T) {
		c2 := testenv.Kafka(t, map[string]int32{"gone": 1})
		produce(t, c2, rec("gone", 0, "", "x"))
		adm2 := kadm.NewClient(testenv.KafkaClient(t, c2))
		if _, err := adm2.DeleteTopic(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src := newSource(t, c2, mem, kafka.WithTopics("gone"))
		_, err := src.LatestOffset(ctx, json.RawMessage(`{"gone":{"0":1}}`))
		if !errors.Is(err, kafka.ErrDataLoss) || !strings.Contains(err.Error(), `topic "gone" partition 0: expected offset 1`) {
			t.Fatalf("err = %v", err)
		}
		src2 := newSource(t, c2, mem, kafka.WithTopics("gone"), kafka.WithFailOnDataLoss(false))
		end, err := src2.LatestOffset(ctx, json.RawMessage(`{"gone":{"0":1}}`))
		if err != nil || offs(t, end) != `{}` {
			t.Fatalf("end %s, err %v", end, err)
		}
	})
}

func TestMaxOffsetsPerTrigger(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"m": 3})
	var recs []*kgo.Record
	for p, n := range []int{100, 10, 1} {
		for i := range n {
			recs = append(recs, rec("m", int32(p), "", fmt.Sprint(p, "-", i)))
		}
	}
	produce(t, c, recs...)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newSource(t, c, mem, kafka.WithTopics("m"), kafka.WithMaxOffsetsPerTrigger(20))
	start := must(t)(src.InitialOffset(ctx))
	end := must(t)(src.LatestOffset(ctx, start))
	if offs(t, end) != `{"m":{"0":17,"1":2,"2":1}}` {
		t.Fatalf("end %s", end)
	}
	// Drain: every batch takes at most 20, and all 111 records arrive once.
	seen := map[string]bool{}
	for batches := 0; string(start) != string(end); batches++ {
		if batches > 10 {
			t.Fatal("did not drain in 10 batches")
		}
		rows, err := readRows(t, src, start, end)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) > 20 {
			t.Fatalf("batch of %d rows", len(rows))
		}
		for _, r := range rows {
			if seen[r.Value] {
				t.Fatalf("%s twice", r.Value)
			}
			seen[r.Value] = true
		}
		start, end = end, must(t)(src.LatestOffset(ctx, end))
	}
	if len(seen) != 111 {
		t.Fatalf("read %d records, want 111", len(seen))
	}
}

func TestStartingOffsets(t *testing.T) {
	ctx := context.Background()
	c := testenv.Kafka(t, map[string]int32{"s": 2})
	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for i := range 4 {
		r := rec("s", int32(i%2), "", fmt.Sprint(i))
		r.Timestamp = base.Add(time.Duration(i) * time.Minute)
		recs = append(recs, r)
	}
	produce(t, c, recs...)
	for _, tc := range []struct {
		name string
		pos  kafka.StartingPosition
		want string
	}{
		{"earliest", kafka.Earliest(), `{"s":{"0":0,"1":0}}`},
		{"latest", kafka.Latest(), `{"s":{"0":2,"1":2}}`},
		{"specific", kafka.SpecificOffsets(`{"s":{"0":1,"1":-1}}`), `{"s":{"0":1,"1":2}}`},
		{"timestamp", kafka.AtTimestamp(base.Add(90 * time.Second)), `{"s":{"0":1,"1":1}}`},
		{"timestamp after all", kafka.AtTimestamp(base.Add(time.Hour)), `{"s":{"0":2,"1":2}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := newSource(t, c, memory.DefaultAllocator, kafka.WithTopics("s"), kafka.WithStartingOffsets(tc.pos))
			got := must(t)(src.InitialOffset(ctx))
			if offs(t, got) != tc.want {
				t.Fatalf("initial %s, want %s", got, tc.want)
			}
		})
	}
}

var paymentSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
	{Name: "at", Type: arrow.FixedWidthTypes.Timestamp_us},
	{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func TestJSONValues(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"pay": 1, "pay-dlq": 1})
	produce(t, c,
		rec("pay", 0, "a", `{"id":"a","amount_cents":1250,"at":"2026-11-30T10:00:00.123Z","note":"x"}`),
		rec("pay", 0, "b", `{"id":"b","amount_cents":12.5,"at":"2026-11-30T10:00:01Z"}`), // offset 1: not an integer
		rec("pay", 0, "c", `{"id":"c","amount_cents":-7,"at":"2026-11-30T10:00:02.000001Z","extra":true}`),
		rec("pay", 0, "d", `not json`), // offset 3
	)
	start, end := json.RawMessage(`{"pay":{"0":0}}`), json.RawMessage(`{"pay":{"0":4}}`)
	wantGood := []string{"a|1250|2026-11-30T10:00:00.123Z|x", "c|-7|2026-11-30T10:00:02.000001Z|(null)"}

	t.Run("fail", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src := newSource(t, c, mem, kafka.WithTopics("pay"), kafka.WithValueJSON(paymentSchema))
		_, err := readRows(t, src, start, end)
		var de *kafka.DecodeError
		if !errors.As(err, &de) || de.Topic != "pay" || de.Partition != 0 || de.Offset != 1 || de.Field != "amount_cents" {
			t.Fatalf("err = %v (%+v)", err, de)
		}
		if !strings.Contains(err.Error(), `topic "pay" partition 0 offset 1: field "amount_cents"`) {
			t.Fatalf("message %q", err)
		}
	})
	t.Run("dead letter dir", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		dir := t.TempDir()
		src := newSource(t, c, mem, kafka.WithTopics("pay"), kafka.WithValueJSON(paymentSchema), kafka.WithDeadLetterDir(dir))
		for range 2 { // a re-run overwrites the same file
			rows, err := readRows(t, src, start, end)
			if err != nil {
				t.Fatal(err)
			}
			if got := values(rows); !reflect.DeepEqual(got, wantGood) {
				t.Fatalf("values %v", got)
			}
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 || ents[0].Name() != kafka.DeadLetterFileName("pay", 0, 0, 4) {
			t.Fatalf("dead-letter dir holds %v", ents)
		}
		f, err := os.Open(filepath.Join(dir, ents[0].Name()))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var offs []int64
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l struct {
				Offset int64  `json:"offset"`
				Error  string `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Error == "" {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			offs = append(offs, l.Offset)
		}
		if !reflect.DeepEqual(offs, []int64{1, 3}) {
			t.Fatalf("dead-letter offsets %v", offs)
		}
		if st := src.Stats(); st.DeadLetters != 4 {
			t.Fatalf("dead letters counted %d, want 4 (two reads of two)", st.DeadLetters)
		}
	})
	t.Run("dead letter topic", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		src := newSource(t, c, mem, kafka.WithTopics("pay"), kafka.WithValueJSON(paymentSchema), kafka.WithDeadLetterTopic("pay-dlq"),
			kafka.WithDeadLetterTransactionalID("json-values"))
		rows, err := readRows(t, src, start, end)
		if err != nil {
			t.Fatal(err)
		}
		if got := values(rows); !reflect.DeepEqual(got, wantGood) {
			t.Fatalf("values %v", got)
		}
		dl := testenv.KafkaReadCommitted(t, c, "pay-dlq", 0)
		if len(dl) != 2 || string(dl[0].Key) != "pay/0/1" || string(dl[1].Key) != "pay/0/3" {
			t.Fatalf("dead letters %v", dl)
		}
		var reason string
		for _, h := range dl[0].Headers {
			if h.Key == kafka.HeaderError {
				reason = string(h.Value)
			}
		}
		if !strings.Contains(reason, `field "amount_cents"`) {
			t.Fatalf("reason header %q", reason)
		}
	})
}

func TestHeadersAndSchema(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"h": 1})
	r := rec("h", 0, "k", "v")
	r.Headers = []kgo.RecordHeader{{Key: "trace", Value: []byte("1")}, {Key: "x", Value: []byte("y")}}
	produce(t, c, r)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newSource(t, c, mem, kafka.WithTopics("h"), kafka.WithValueString())
	rows, err := readRows(t, src, json.RawMessage(`{"h":{"0":0}}`), json.RawMessage(`{"h":{"0":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []row{{Topic: "h", Partition: 0, Offset: 0, Key: "k", Value: "v", Headers: "trace=1;x=y;"}}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("rows %+v", rows)
	}
	if got := src.Description(); got != "kafka[h]" {
		t.Fatalf("description %q", got)
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []kafka.Option
		want string
	}{
		{"no brokers", []kafka.Option{kafka.WithTopics("t")}, "no brokers"},
		{"no topics", []kafka.Option{kafka.WithBrokers("x:1")}, "exactly one of WithTopics and WithTopicPattern"},
		{"both", []kafka.Option{kafka.WithBrokers("x:1"), kafka.WithTopics("t"), kafka.WithTopicPattern("t")}, "exactly one"},
		{"bad pattern", []kafka.Option{kafka.WithBrokers("x:1"), kafka.WithTopicPattern("(")}, "topic pattern"},
		{"collision", []kafka.Option{kafka.WithBrokers("x:1"), kafka.WithTopics("t"), kafka.WithValueJSON(arrow.NewSchema([]arrow.Field{{Name: "offset", Type: arrow.PrimitiveTypes.Int64}}, nil))}, "collides"},
		{"bad start", []kafka.Option{kafka.WithBrokers("x:1"), kafka.WithTopics("t"), kafka.WithStartingOffsets(kafka.SpecificOffsets(`{"t":{"0":-3}}`))}, "starting offsets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kafka.New(tc.opts...)
			if !errors.Is(err, kafka.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestTombstones reads a compacted topic's tombstone (a null value) under
// WithValueJSON: a row of nulls with WithTombstones, a decode failure
// without; WithTombstones needs nullable fields.
func TestTombstones(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"profiles": 1})
	produce(t, c,
		rec("profiles", 0, "u-1", `{"segment":"retail"}`),
		&kgo.Record{Topic: "profiles", Partition: 0, Key: []byte("u-1")}, // a tombstone
	)
	schema := arrow.NewSchema([]arrow.Field{{Name: "segment", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	start, end := json.RawMessage(`{"profiles":{"0":0}}`), json.RawMessage(`{"profiles":{"0":2}}`)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := newSource(t, c, mem, kafka.WithTopics("profiles"), kafka.WithValueJSON(schema), kafka.WithTombstones())
	rows, err := readRows(t, src, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(rows); !reflect.DeepEqual(got, []string{"retail", "(null)"}) || rows[1].Key != "u-1" {
		t.Fatalf("rows %+v", rows)
	}
	strict := newSource(t, c, mem, kafka.WithTopics("profiles"), kafka.WithValueJSON(schema))
	if _, err := readRows(t, strict, start, end); err == nil || !strings.Contains(err.Error(), "value is null") {
		t.Fatalf("without WithTombstones: %v", err)
	}
	notNull := arrow.NewSchema([]arrow.Field{{Name: "segment", Type: arrow.BinaryTypes.String}}, nil)
	if _, err := kafka.New(kafka.WithBrokers(c.Addrs()...), kafka.WithTopics("profiles"), kafka.WithValueJSON(notNull), kafka.WithTombstones()); err == nil || !strings.Contains(err.Error(), "must be nullable") {
		t.Fatalf("a non-nullable field with WithTombstones: %v", err)
	}
}
