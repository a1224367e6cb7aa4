package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// lakeFixture is a checkpoint and a file-sink table, each in a directory of
// its own so the test can copy and restore them.
type lakeFixture struct {
	t       *testing.T
	cp      storage.Store
	lakeDir string
	src     *seqSource
}

func newLakeFixture(t *testing.T) *lakeFixture {
	t.Helper()
	return &lakeFixture{t: t, cp: localStore(t), lakeDir: filepath.Join(t.TempDir(), "lake"), src: newSeq(0, 10, 3)}
}

func (f *lakeFixture) sink() *filesink.Sink {
	f.t.Helper()
	table, err := storage.OpenLocal(f.lakeDir, storage.LocalOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { table.Close() })
	s, err := filesink.New(table)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// run lands rows up to avail and runs the query AvailableNow into sink.
func (f *lakeFixture) run(avail int64, sink Sink) error {
	f.t.Helper()
	f.src.avail.Store(avail)
	_, err := runQuery(f.t, ReadStream(f.src), WithCheckpoint(f.cp), WithSink(sink), WithTrigger(AvailableNow()))
	return err
}

func (f *lakeFixture) version() int64 {
	f.t.Helper()
	table, err := storage.OpenLocal(f.lakeDir, storage.LocalOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	defer table.Close()
	v, err := filesink.Version(context.Background(), table)
	if err != nil {
		f.t.Fatal(err)
	}
	return v
}

func (f *lakeFixture) commits() []int64 {
	f.t.Helper()
	ids, err := offsetlog.New[CommitEntry](f.cp, checkpoint.CommitsDir).List(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return ids
}

// Regression: a lake restored from a backup holds fewer batches than
// commits/ records; the engine went on at the newest commit + 1 and the
// batches the restore lost never reached the lake again. Now the restart
// is refused, naming the sink, both batch ids and the way out.
func TestSinkBehindCheckpointIsRefused(t *testing.T) {
	f := newLakeFixture(t)
	if err := f.run(20, f.sink()); err != nil { // batches 0 and 1
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	if err := os.CopyFS(backup, os.DirFS(f.lakeDir)); err != nil {
		t.Fatal(err)
	}
	if err := f.run(40, f.sink()); err != nil { // batches 2 and 3
		t.Fatal(err)
	}
	if err := os.RemoveAll(f.lakeDir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(f.lakeDir, os.DirFS(backup)); err != nil { // the restore
		t.Fatal(err)
	}
	if v := f.version(); v != 1 {
		t.Fatalf("restored lake at version %d, want 1", v)
	}

	err := f.run(50, f.sink())
	if !errors.Is(err, ErrIncompatibleRestart) {
		t.Fatalf("a lake behind the checkpoint was accepted (err %v); commits now %v, lake at %d: batches 2 and 3 are lost", err, f.commits(), f.version())
	}
	t.Logf("refusal: %v", err)
	for _, want := range []string{"files[", "up to 1", "up to 3", "batches 2 to 3", "onceflow checkpoint fork", "--from-batch 2", "new output"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if got := fmt.Sprint(f.commits()); got != "[0 1 2 3]" || f.version() != 1 {
		t.Fatalf("the refused run changed something: commits %s, lake at %d", got, f.version())
	}
}

// Regression: a sink with nothing applied (an emptied output, a new one)
// while the checkpoint has commits was fed from the next batch on, missing
// every committed one. Now it is refused; a new checkpoint on it is fine.
func TestEmptySinkBehindCheckpointIsRefused(t *testing.T) {
	f := newLakeFixture(t)
	if err := f.run(20, f.sink()); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(f.lakeDir); err != nil {
		t.Fatal(err)
	}
	err := f.run(30, f.sink())
	t.Logf("refusal: %v", err)
	if !errors.Is(err, ErrIncompatibleRestart) || !strings.Contains(err.Error(), "has applied no batch") || !strings.Contains(err.Error(), "up to 1") {
		t.Fatalf("an empty lake under a checkpoint with commits: %v", err)
	}
	f.cp = localStore(t) // the way out: a new checkpoint
	if err := f.run(30, f.sink()); err != nil {
		t.Fatalf("a new checkpoint on the emptied lake: %v", err)
	}
	if v := f.version(); v != 2 {
		t.Fatalf("lake at version %d, want 2 (batches 0..2 of the new checkpoint)", v)
	}
}

// failAfter applies batches to its sink, then fails the call for batch
// failAt, as if the driver died between the sink's commit and commits/N.
type failAfter struct {
	Sink
	failAt int64
}

func (s *failAfter) AddBatch(ctx context.Context, id int64, schema *arrow.Schema, recs []arrow.RecordBatch) error {
	if err := s.Sink.AddBatch(ctx, id, schema, recs); err != nil {
		return err
	}
	if id == s.failAt {
		return errors.New("the driver dies after the sink applied the batch")
	}
	return nil
}

func (s *failAfter) LastBatchID(ctx context.Context) (int64, bool, error) {
	return s.Sink.(SinkPosition).LastBatchID(ctx)
}

// The one position past the newest commit that is accepted: the sink
// applied the planned batch N, and the driver died before commits/N. The
// restart re-runs N (the sink skips it) and commits it.
func TestSinkAtPlannedBatchIsAccepted(t *testing.T) {
	f := newLakeFixture(t)
	if err := f.run(20, f.sink()); err != nil {
		t.Fatal(err)
	}
	if err := f.run(30, &failAfter{Sink: f.sink(), failAt: 2}); err == nil {
		t.Fatal("the failing attempt of batch 2 succeeded")
	}
	if got := fmt.Sprint(f.commits()); got != "[0 1]" || f.version() != 2 {
		t.Fatalf("after the failed attempt: commits %s, lake at %d; want [0 1] and 2", got, f.version())
	}
	if err := f.run(30, f.sink()); err != nil {
		t.Fatalf("restart with the lake at the planned batch: %v", err)
	}
	if got := fmt.Sprint(f.commits()); got != "[0 1 2]" || f.version() != 2 {
		t.Fatalf("after recovery: commits %s, lake at %d", got, f.version())
	}
}

// A fork runs into new sinks, which hold nothing while the fork's commits
// (copied from the original) end before its first batch: accepted.
func TestForkIntoNewSinkIsAccepted(t *testing.T) {
	f := newLakeFixture(t)
	if err := f.run(40, f.sink()); err != nil {
		t.Fatal(err)
	}
	dst := localStore(t)
	if _, err := ForkCheckpoint(context.Background(), f.cp, dst, 2); err != nil {
		t.Fatal(err)
	}
	f.cp, f.lakeDir = dst, filepath.Join(t.TempDir(), "fork-lake")
	if err := f.run(40, f.sink()); err != nil {
		t.Fatalf("a fork into a new lake: %v", err)
	}
	if got := fmt.Sprint(f.commits()); got != "[0 1 2 3]" || f.version() != 3 {
		t.Fatalf("fork: commits %s, lake at %d", got, f.version())
	}
	// Restarted, the fork's lake is at its newest commit: accepted.
	if err := f.run(50, f.sink()); err != nil {
		t.Fatalf("restart of the fork: %v", err)
	}
}

// positionSink reports a fixed position, or an error.
type positionSink struct {
	*memsink.Sink
	last int64
	err  error
	g    Guarantee
}

func (p *positionSink) LastBatchID(context.Context) (int64, bool, error) {
	return p.last, p.last >= 0, p.err
}

func (p *positionSink) Guarantee() Guarantee {
	if p.g == "" {
		return ExactlyOnce
	}
	return p.g
}

func TestSinkPositionCheck(t *testing.T) {
	cp := localStore(t)
	src := newSeq(30, 10, 3) // batches 0..2
	if _, err := runQuery(t, ReadStream(src), WithCheckpoint(cp), WithSink(memsink.New("a")), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		sink *positionSink
		opts []Option
		want string // "" accepted, else a part of the error
	}{
		{"at the newest commit", &positionSink{last: 2}, nil, ""},
		{"ahead", &positionSink{last: 3}, nil, "has applied batch 3"},
		{"behind", &positionSink{last: 0}, nil, "batches 1 to 2"},
		{"nothing applied", &positionSink{last: -1}, nil, "has applied no batch"},
		{"keeps no position", &positionSink{last: -1, err: fmt.Errorf("upsert: %w", errors.ErrUnsupported)}, nil, ""},
		{"at-least-once", &positionSink{last: -1, g: AtLeastOnce}, []Option{WithAtLeastOnce()}, ""},
		{"unreadable", &positionSink{last: 2, err: errors.New("connection refused")}, nil, "connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.sink.Sink = memsink.New("pos")
			opts := append([]Option{WithCheckpoint(cp), WithSink(tc.sink), WithTrigger(AvailableNow())}, tc.opts...)
			_, err := runQuery(t, ReadStream(src), opts...)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			case tc.want != "" && tc.sink.err == nil && !errors.Is(err, ErrIncompatibleRestart):
				t.Fatalf("got %v, want ErrIncompatibleRestart", err)
			}
		})
	}
}

// Regression: the late-rows sink got a batch only when it had late rows,
// so its position lagged the commits and it was never checked. Now it gets
// every batch and is checked like the other sinks.
func TestLateRowsSinkPositionIsChecked(t *testing.T) {
	cp := localStore(t)
	stream := func() *Stream {
		return ReadStream(&scriptSource{batches: outOfOrder}).
			WithWatermark("ts", 5*time.Second).
			GroupByWindow(TumblingWindow("ts", 10*time.Second), "key").ID("win").
			Agg(batch.Sum(batch.Col("amount")).As("total"))
	}
	late := &positionSink{Sink: memsink.New("late"), last: -1}
	if _, err := runQuery(t, stream(), WithCheckpoint(cp), WithSink(memsink.New("out")), WithTrigger(AvailableNow()), WithLateRows(late)); err != nil {
		t.Fatal(err)
	}
	ids, err := offsetlog.New[CommitEntry](cp, checkpoint.CommitsDir).List(context.Background())
	if err != nil || len(ids) == 0 {
		t.Fatalf("commits %v, %v", ids, err)
	}
	if got, want := fmt.Sprint(late.BatchIDs()), fmt.Sprint(ids); got != want {
		t.Fatalf("late-rows sink got batches %s, want every committed batch %s", got, want)
	}
	newest := ids[len(ids)-1]
	late.last = newest - 1
	_, err = runQuery(t, stream(), WithCheckpoint(cp), WithSink(memsink.New("out")), WithTrigger(AvailableNow()), WithLateRows(late))
	if !errors.Is(err, ErrIncompatibleRestart) || !strings.Contains(err.Error(), "late-rows sink") {
		t.Fatalf("a late-rows sink behind the checkpoint: %v", err)
	}
	late.last = newest
	if _, err := runQuery(t, stream(), WithCheckpoint(cp), WithSink(memsink.New("out")), WithTrigger(AvailableNow()), WithLateRows(late)); err != nil {
		t.Fatalf("a late-rows sink at the newest commit: %v", err)
	}
}

// Regression: an offsets-in-sink progress row set back (a failover to an
// asynchronous replica that had not received the newest transactions) was
// not noticed: the guard accepted batch committed+1 and the batches in
// between never reached the table. Now the restart is refused.
func TestPostgresProgressBehindCheckpointIsRefused(t *testing.T) {
	dsn := testenv.PGURL(t)
	ctx := context.Background()
	pool, err := postgres.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, ddl := range []string{
		"CREATE TABLE rows (i bigint, key text, amount bigint)",
		"CREATE TABLE onceflow_progress (job text PRIMARY KEY, batch_id bigint NOT NULL, updated_at timestamptz NOT NULL, query_id text)",
	} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	sink := func() Sink {
		s, err := postgres.NewOffsetsInSink(pool, "behind", "rows")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cp := localStore(t)
	src := newSeq(40, 10, 3) // batches 0..3
	if _, err := runQuery(t, ReadStream(src), WithCheckpoint(cp), WithSink(sink()), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	// The replica lost batches 2 and 3: their rows and the progress.
	if _, err := pool.Exec(ctx, "DELETE FROM rows WHERE i >= 20"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE onceflow_progress SET batch_id = 1 WHERE job = 'behind'"); err != nil {
		t.Fatal(err)
	}
	src.avail.Store(50)
	_, err = runQuery(t, ReadStream(src), WithCheckpoint(cp), WithSink(sink()), WithTrigger(AvailableNow()))
	if !errors.Is(err, ErrIncompatibleRestart) || !strings.Contains(err.Error(), "batches 2 to 3") || !strings.Contains(err.Error(), "--from-batch 2") {
		t.Fatalf("a progress row behind the checkpoint: %v", err)
	}
	if strings.Contains(err.Error(), dsn) {
		t.Fatalf("the error holds the database URL: %v", err)
	}
	var n int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM rows").Scan(&n); err != nil || n != 20 {
		t.Fatalf("the refused run wrote rows: %d rows (%v), want 20", n, err)
	}
}

// highWaterSink knows only the highest batch id its rows carry, as the
// PostgreSQL upsert sink does.
type highWaterSink struct {
	*memsink.Sink
	high int64
}

func (h *highWaterSink) HighestBatchID(context.Context) (int64, bool, error) {
	return h.high, h.high >= 0, nil
}

// A sink with only a high-water mark is refused when it holds rows of a
// batch the checkpoint never planned (its re-planned, lower batch ids
// would be ignored as older), and never refused for being below the
// newest commit, since batches without rows leave no trace in it.
func TestSinkHighWaterCheck(t *testing.T) {
	cp := localStore(t)
	src := newSeq(30, 10, 3) // batches 0..2
	if _, err := runQuery(t, ReadStream(src), WithCheckpoint(cp), WithSink(memsink.New("a")), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		high int64
		want string
	}{
		{"no rows", -1, ""},
		{"below the newest commit", 0, ""},
		{"at the newest commit", 2, ""},
		{"ahead", 7, "holds rows of batch 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &highWaterSink{Sink: memsink.New("hw"), high: tc.high}
			_, err := runQuery(t, ReadStream(src), WithCheckpoint(cp), WithSink(s), WithTrigger(AvailableNow()))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrIncompatibleRestart) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want ErrIncompatibleRestart saying %q", err, tc.want)
			}
		})
	}
}
