package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/memsink"
)

// memStatic is a static table with numbered versions, each a list of
// (key, val) rows; the newest is the last.
type memStatic struct {
	mu       sync.Mutex
	versions [][][2]string
	reads    []string
}

var staticSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "val", Type: arrow.BinaryTypes.String},
}, nil)

func (m *memStatic) Schema() *arrow.Schema { return staticSchema }
func (m *memStatic) Description() string   { return "mem" }
func (m *memStatic) LatestVersion(context.Context) (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return json.RawMessage(strconv.Itoa(len(m.versions) - 1)), nil
}
func (m *memStatic) add(rows ...[2]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.versions = append(m.versions, rows)
}
func (m *memStatic) ReadVersion(_ context.Context, v json.RawMessage, emit func(arrow.RecordBatch) error) error {
	m.mu.Lock()
	i, err := strconv.Atoi(string(v))
	if err != nil || i < 0 || i >= len(m.versions) {
		m.mu.Unlock()
		return fmt.Errorf("no version %s", v)
	}
	rows := m.versions[i]
	m.reads = append(m.reads, string(v))
	m.mu.Unlock()
	kb, vb := array.NewStringBuilder(memory.DefaultAllocator), array.NewStringBuilder(memory.DefaultAllocator)
	defer kb.Release()
	defer vb.Release()
	for _, r := range rows {
		if r[0] == "" {
			kb.AppendNull()
		} else {
			kb.Append(r[0])
		}
		vb.Append(r[1])
	}
	cols := []arrow.Array{kb.NewArray(), vb.NewArray()}
	rec := array.NewRecordBatch(staticSchema, cols, int64(len(rows)))
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}

// staticSink changes the static table after each batch it takes, so that
// every batch is planned against a new version.
type staticSink struct {
	*memsink.Sink
	table  *memStatic
	failAt int64
	failed bool
}

func (s *staticSink) AddBatch(ctx context.Context, id int64, sc *arrow.Schema, r []arrow.RecordBatch) error {
	s.table.add([2]string{"a", fmt.Sprint("a", id+1)}, [2]string{"b", fmt.Sprint("b", id+1)}, [2]string{"b", fmt.Sprint("b'", id+1)}, [2]string{"", "nullkey"})
	if id == s.failAt && !s.failed {
		s.failed = true
		return fmt.Errorf("injected sink failure")
	}
	return s.Sink.AddBatch(ctx, id, sc, r)
}

// TestStaticJoinReplaysTheRecordedVersion runs a stream-static join whose
// table changes after every batch: each batch joins the version planned
// into its offsets/N (EveryBatch: the newest at planning; Pinned: the
// first), duplicates of a key all match, and a batch that fails and is
// re-run after the table changed again joins the version its first attempt
// joined.
func TestStaticJoinReplaysTheRecordedVersion(t *testing.T) {
	for _, refresh := range []Refresh{EveryBatch, Pinned} {
		for _, kind := range []JoinKind{Inner, LeftOuter} {
			t.Run(fmt.Sprint(refresh, "/", kind), func(t *testing.T) {
				table := &memStatic{}
				table.add([2]string{"a", "a0"})
				batches := [][]jRow{{{"a", 1, 1}, {"b", 1, 2}}, {{"a", 2, 3}, {"b", 2, 4}, {"", 2, 5}}, {{"b", 3, 6}}, {{"a", 4, 7}}}
				src := newJSource("s", batches)
				sink := &staticSink{Sink: memsink.New("out"), table: table, failAt: 2}
				cp := localStore(t)
				stream := ReadStream(src).JoinStatic(table, kind, refresh, On("key", "key")).ID("st")
				if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow())); err == nil || !strings.Contains(err.Error(), "injected") {
					t.Fatalf("want the injected failure, got %v", err)
				}
				if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow())); err != nil {
					t.Fatal(err)
				}
				// Batch k is planned after the sink saw batches < k (and
				// the failed attempt of 2): version k for EveryBatch, 0 for
				// Pinned until the restart, which pins the newest then.
				version := func(k int) int {
					switch {
					case refresh == EveryBatch:
						return k
					case k <= 2:
						return 0
					default:
						return 4 // pinned at the restart: versions 0..3 and the failed attempt's
					}
				}
				for k := range batches {
					var want []string
					v := version(k)
					rows := table.versions[v]
					for _, r := range batches[k] {
						n := 0
						for _, tr := range rows {
							if r.key != "" && tr[0] == r.key {
								want = append(want, fmt.Sprintf("%s %d %s", r.key, r.id, tr[1]))
								n++
							}
						}
						if n == 0 && kind == LeftOuter {
							k := r.key
							if k == "" {
								k = "null"
							}
							want = append(want, fmt.Sprintf("%s %d null", k, r.id))
						}
					}
					var got []string
					for _, r := range sink.Batch(int64(k)) {
						k := fmt.Sprint(r[0])
						if r[0] == nil {
							k = "null"
						}
						v := fmt.Sprint(r[4])
						if r[4] == nil {
							v = "null"
						}
						got = append(got, fmt.Sprintf("%s %v %s", k, r[2], v))
					}
					sort.Strings(got)
					sort.Strings(want)
					if strings.Join(got, ",") != strings.Join(want, ",") {
						t.Errorf("batch %d (version %d): got %v, want %v", k, v, got, want)
					}
				}
			})
		}
	}
}
