package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// Review of h/latency (state sync overlapped with the sinks, planning
// ahead): failing-first tests.

// reviewFS fails chosen calls on state delta files of one version.
type reviewFS struct {
	storage.FS
	version int64
	// failRenameAt fails the n-th rename (1-based) onto a delta file of
	// version; 0: never.
	failRenameAt int
	// failSync fails the fsync of every temporary file of a delta of
	// version, with ENOSPC.
	failSync bool

	mu      sync.Mutex
	renames int
	failed  atomic.Bool
}

func (f *reviewFS) isDelta(name string) bool {
	return filepath.Base(name) == statestore.FileName(f.version, false) ||
		strings.HasPrefix(filepath.Base(name), statestore.FileName(f.version, false)+".")
}

func (f *reviewFS) Rename(oldname, newname string) error {
	if f.failRenameAt > 0 && f.isDelta(newname) {
		f.mu.Lock()
		f.renames++
		n := f.renames
		f.mu.Unlock()
		if n == f.failRenameAt {
			f.failed.Store(true)
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EROFS}
		}
	}
	return f.FS.Rename(oldname, newname)
}

func (f *reviewFS) Create(name string) (storage.File, error) {
	file, err := f.FS.Create(name)
	if err != nil || !f.failSync || !f.isDelta(name) {
		return file, err
	}
	return &reviewFile{File: file, fs: f}, nil
}

type reviewFile struct {
	storage.File
	fs *reviewFS
}

func (r *reviewFile) Sync() error {
	r.fs.failed.Store(true)
	return syscall.ENOSPC
}

// checkingSink is a memsink that also checks a batch handed again (a
// re-run) holds the same rows as the first time: a re-run from wrong state
// would differ.
type checkingSink struct {
	*memsink.Sink
	mu       sync.Mutex
	first    map[int64]string
	mismatch []string
	stopAt   int64 // Stop q after this batch is added (0: never)
	q        atomic.Pointer[Query]
}

func newCheckingSink() *checkingSink {
	return &checkingSink{Sink: memsink.New("out"), first: map[int64]string{}, stopAt: -1}
}

func (c *checkingSink) AddBatch(ctx context.Context, id int64, s *arrow.Schema, recs []arrow.RecordBatch) error {
	rows, err := memsink.Rows(recs)
	if err != nil {
		return err
	}
	got := fmt.Sprint(totals(rows))
	c.mu.Lock()
	if prev, ok := c.first[id]; ok && prev != got {
		c.mismatch = append(c.mismatch, fmt.Sprintf("batch %d re-run: %s, first run: %s", id, got, prev))
	} else if !ok {
		c.first[id] = got
	}
	c.mu.Unlock()
	if err := c.Sink.AddBatch(ctx, id, s, recs); err != nil {
		return err
	}
	if id == c.stopAt {
		if q := c.q.Load(); q != nil {
			q.Stop()
		}
	}
	return nil
}

func (c *checkingSink) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.mismatch {
		t.Error(m)
	}
}

// wantTotals is the sum of i%10 and the count per key "k<i%keys>" over
// rows [0, n).
func wantTotals(n, keys int64) map[string]string {
	sum, cnt := map[string]int64{}, map[string]int64{}
	for i := int64(0); i < n; i++ {
		k := "k" + strconv.FormatInt(i%keys, 10)
		sum[k] += i % 10
		cnt[k]++
	}
	out := map[string]string{}
	for k := range sum {
		out[k] = fmt.Sprint([]any{sum[k], cnt[k]})
	}
	return out
}

// finalTotals folds the update-mode batches of sink: the last row per key.
func finalTotals(s *memsink.Sink) map[string]string {
	final := map[string]string{}
	for _, id := range s.BatchIDs() {
		for k, v := range totals(s.Batch(id)) {
			final[k] = v
		}
	}
	return final
}

func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".tmp") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestReviewStateSyncFailsAfterSink: the sink commits batch 2 while the
// state sync of version 2 fails (the rename of its bundle of deltas, or
// ENOSPC at the fsync). The run must stop with the
// error and not write commits/2; a restart must re-run batch 2 from state 1
// and give every row exactly once.
func TestReviewStateSyncFailsAfterSink(t *testing.T) {
	cases := []struct {
		name string
		fs   func() *reviewFS
	}{
		// The state of version 2 is one bundle file (every partition's
		// delta): its rename is the one that fails.
		{"rename fails", func() *reviewFS { return &reviewFS{FS: storage.OSFS{}, version: 2, failRenameAt: 1} }},
		{"fsync ENOSPC", func() *reviewFS { return &reviewFS{FS: storage.OSFS{}, version: 2, failSync: true} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ffs := tc.fs()
			cp, err := storage.OpenLocal(dir, storage.LocalOptions{FS: ffs})
			if err != nil {
				t.Fatal(err)
			}
			sink := newCheckingSink()
			mk := func() *Stream {
				return ReadStream(newSeq(100, 30, 4)).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
			}
			_, err = runQuery(t, mk(), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3))
			if !ffs.failed.Load() {
				t.Fatalf("the fault was never injected (err %v)", err)
			}
			if err == nil || !strings.Contains(err.Error(), "durable") {
				t.Fatalf("run: %v, want the state sync's error", err)
			}
			if got := fmt.Sprint(sink.BatchIDs()); got != "[0 1 2]" && got != "[0 1]" {
				t.Fatalf("sink after the failed run holds %s", got)
			}
			if tmps := tempFiles(t, dir); len(tmps) > 0 {
				t.Errorf("temporary files left after the failed sync: %v", tmps)
			}
			cp2, err := storage.OpenLocal(dir, storage.LocalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := runQuery(t, mk(), WithCheckpoint(cp2), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3)); err != nil {
				t.Fatal(err)
			}
			sink.check(t)
			if got := fmt.Sprint(sink.BatchIDs()); got != "[0 1 2 3]" {
				t.Fatalf("batches %s", got)
			}
			if got, want := fmt.Sprint(finalTotals(sink.Sink)), fmt.Sprint(wantTotals(100, 4)); got != want {
				t.Fatalf("totals\n got %s\nwant %s", got, want)
			}
			// A third run from the restored state changes nothing.
			cp3, err := storage.OpenLocal(dir, storage.LocalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := runQuery(t, mk(), WithCheckpoint(cp3), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3)); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(sink.BatchIDs()); got != "[0 1 2 3]" {
				t.Fatalf("batches after a third run %s", got)
			}
		})
	}
}

// reviewSrc is a seqSource that records LatestOffset calls made after the
// run ended and can fail one LatestOffset call.
type reviewSrc struct {
	*seqSource
	ended     atomic.Bool
	lateCalls atomic.Int64
	calls     atomic.Int64
	failCall  int64 // fail the n-th LatestOffset call (1-based); 0: never
}

func (s *reviewSrc) LatestOffset(ctx context.Context, start json.RawMessage) (json.RawMessage, error) {
	n := s.calls.Add(1)
	if s.ended.Load() {
		s.lateCalls.Add(1)
	}
	if s.failCall > 0 && n == s.failCall {
		return nil, errors.New("injected latest offset failure")
	}
	return s.seqSource.LatestOffset(ctx, start)
}

func (s *reviewSrc) Read(ctx context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	if s.ended.Load() {
		s.lateCalls.Add(1)
	}
	return s.seqSource.Read(ctx, start, end, emit)
}

// TestReviewPlanAheadStop: Stop after batch 5 under Every(0), stateful:
// the run ends after committing 5, leaves no planned batch 6 in the log,
// touches the source no more after Run returns, and a restart continues
// exactly once.
func TestReviewPlanAheadStop(t *testing.T) {
	dir := t.TempDir()
	cp, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := &reviewSrc{seqSource: newSeq(1000, 7, 4)}
	sink := newCheckingSink()
	sink.stopAt = 5
	q, err := NewQuery(ReadStream(src).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n")),
		WithCheckpoint(cp), WithSink(sink), WithTrigger(Every(0)), WithStatePartitions(2))
	if err != nil {
		t.Fatal(err)
	}
	sink.q.Store(q)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	src.ended.Store(true)
	time.Sleep(50 * time.Millisecond)
	if n := src.lateCalls.Load(); n > 0 {
		t.Errorf("the source was called %d times after Run returned", n)
	}
	if got := fmt.Sprint(sink.BatchIDs()); got != "[0 1 2 3 4 5]" {
		t.Fatalf("batches %s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, offsetlog.FileName(checkpoint.OffsetsDir, 5))); err != nil {
		t.Fatalf("offsets/5: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, offsetlog.FileName(checkpoint.OffsetsDir, 6))); err == nil {
		t.Errorf("offsets/6 was written by a stopped run")
	}
	// Restart: AvailableNow over rows [0, 100).
	src2 := &reviewSrc{seqSource: newSeq(100, 7, 4)}
	if _, err := runQuery(t, ReadStream(src2).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n")),
		WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2)); err != nil {
		t.Fatal(err)
	}
	sink.check(t)
	if got, want := fmt.Sprint(finalTotals(sink.Sink)), fmt.Sprint(wantTotals(100, 4)); got != want {
		t.Fatalf("totals\n got %s\nwant %s", got, want)
	}
}

// TestReviewPlanAheadLatestOffsetError: the LatestOffset call made while
// commits/N is written fails. Batch N must be committed (its commit
// succeeded), the run must end with the source's error, and a restart must
// continue exactly once.
func TestReviewPlanAheadLatestOffsetError(t *testing.T) {
	dir := t.TempDir()
	cp, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Calls: 1 plans batch 0 (loop), 2 plans batch 1 (ahead), 3 batch 2,
	// 4 batch 3 (ahead, fails).
	src := &reviewSrc{seqSource: newSeq(1000, 10, 4), failCall: 4}
	sink := newCheckingSink()
	mk := func(s Source) *Stream {
		return ReadStream(s).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
	}
	_, err = runQuery(t, mk(src), WithCheckpoint(cp), WithSink(sink), WithTrigger(Every(0)), WithStatePartitions(2))
	if err == nil || !strings.Contains(err.Error(), "injected latest offset failure") {
		t.Fatalf("run: %v, want the source's error", err)
	}
	ids := sink.BatchIDs()
	if len(ids) == 0 {
		t.Fatal("no batch ran")
	}
	src2 := &reviewSrc{seqSource: newSeq(100, 10, 4)}
	if _, err := runQuery(t, mk(src2), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2)); err != nil {
		t.Fatal(err)
	}
	sink.check(t)
	if got, want := fmt.Sprint(finalTotals(sink.Sink)), fmt.Sprint(wantTotals(100, 4)); got != want {
		t.Fatalf("totals\n got %s\nwant %s", got, want)
	}
	for id, n := range sink.Repeats() {
		if n > 0 && id < ids[len(ids)-1] {
			t.Errorf("batch %d handed %d more times after it was committed", id, n)
		}
	}
}

// TestReviewEveryZeroRaceStateful runs a stateful query under Every(0)
// with data arriving while it runs, for the race detector: plan-ahead
// goroutines, state syncs and sinks overlap here.
func TestReviewEveryZeroRaceStateful(t *testing.T) {
	cp := localStore(t)
	src := &reviewSrc{seqSource: newSeq(0, 13, 5)}
	sink := newCheckingSink()
	sink.stopAt = 30
	q, err := NewQuery(ReadStream(src).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n")),
		WithCheckpoint(cp), WithSink(sink), WithTrigger(Every(0)), WithStatePartitions(3))
	if err != nil {
		t.Fatal(err)
	}
	sink.q.Store(q)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(1); i <= 400; i++ {
			select {
			case <-ctx.Done():
				return
			default:
			}
			src.avail.Store(i * 3)
			time.Sleep(time.Millisecond)
		}
	}()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	sink.check(t)
	ids := sink.BatchIDs()
	for i, id := range ids {
		if int64(i) != id {
			t.Fatalf("batch ids not contiguous: %v", ids)
		}
	}
}

// TestReviewStateSyncOpenFiles: under a sync group every state file of
// the batch stays open (written, not closed) until the sync, so a batch
// holds one file descriptor per operator × partition × store at once, on
// top of what the sinks use; before h/latency each Put closed its file
// when it returned. With a descriptor limit that the query fit before
// (P = 150 partitions, a dedup then a group-by: 300 state files per batch, limit
// 256), the batch now fails with EMFILE.
func TestReviewStateSyncOpenFiles(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip(err)
	}
	lim := old
	lim.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip(err)
	}
	defer func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) }()
	src := newSeq(3000, 1000, 600)
	sink := memsink.New("out")
	stream := ReadStream(src).DropDuplicates("i").ID("first").
		GroupBy("key").ID("per-key").Agg(batch.Sum(batch.Col("amount")).As("total"))
	if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(150), WithOutputMode(Update)); err != nil {
		t.Fatalf("run with %d descriptors: %v", lim.Cur, err)
	}
	if got := fmt.Sprint(sink.BatchIDs()); got != "[0 1 2]" {
		t.Fatalf("batches %s", got)
	}
}

// slowAfterStopSrc is a seqSource whose LatestOffset takes 2 s once the
// query was asked to stop (a broker that went away, say), and counts those
// calls.
type slowAfterStopSrc struct {
	*seqSource
	stopping     atomic.Bool
	callsStopped atomic.Int64
}

func (s *slowAfterStopSrc) LatestOffset(ctx context.Context, start json.RawMessage) (json.RawMessage, error) {
	if s.stopping.Load() {
		s.callsStopped.Add(1)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return s.seqSource.LatestOffset(ctx, start)
}

// stopSink stops q while it adds batch stopAt (a batch in flight).
type stopSink struct {
	*memsink.Sink
	stopAt int64
	src    *slowAfterStopSrc
	q      atomic.Pointer[Query]
}

func (s *stopSink) AddBatch(ctx context.Context, id int64, sc *arrow.Schema, recs []arrow.RecordBatch) error {
	if id == s.stopAt {
		s.src.stopping.Store(true)
		s.q.Load().Stop()
	}
	return s.Sink.AddBatch(ctx, id, sc, recs)
}

// TestReviewPlanAheadAfterStop: Stop while batch 2 is in flight, under
// Every(0). Stop's contract: finish the batch in flight, commit it, return.
// Before h/latency the loop saw Stop right after commits/2 and asked the
// source nothing more; planAhead now calls LatestOffset (and, for Kafka,
// prefetches) for a batch 3 that will never run, and Run waits for it.
func TestReviewPlanAheadAfterStop(t *testing.T) {
	src := &slowAfterStopSrc{seqSource: newSeq(1000, 10, 4)}
	sink := &stopSink{Sink: memsink.New("out"), stopAt: 2, src: src}
	q, err := NewQuery(ReadStream(src).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("total")),
		WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(Every(0)))
	if err != nil {
		t.Fatal(err)
	}
	sink.q.Store(q)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sink.BatchIDs()); got != "[0 1 2]" {
		t.Fatalf("batches %s, want [0 1 2]", got)
	}
	if n := src.callsStopped.Load(); n > 0 {
		t.Errorf("LatestOffset was called %d times after Stop, for a batch that never runs (Run waited for it)", n)
	}
}

// removeFailFS fails every Remove of a name under dir with EACCES once
// armed.
type removeFailFS struct {
	storage.FS
	dir    string
	armed  atomic.Bool
	failed atomic.Bool
}

func (f *removeFailFS) Remove(name string) error {
	if f.armed.Load() && strings.Contains(name, string(filepath.Separator)+f.dir+string(filepath.Separator)) {
		f.failed.Store(true)
		return &os.PathError{Op: "remove", Path: name, Err: syscall.EACCES}
	}
	return f.FS.Remove(name)
}

// TestReviewBackgroundPurge: the purge now runs beside the next batches.
// With a small retention and snapshots every batch, under Every(0), a run
// stopped mid-way and a failing purge (deletes of state files refused)
// must end Run with the purge's error, leave a checkpoint a restart
// continues exactly once from, and never lose a file a recovery reads.
func TestReviewBackgroundPurge(t *testing.T) {
	for _, failDir := range []string{"", checkpoint.CommitsDir, "state"} {
		t.Run("fail "+failDir, func(t *testing.T) {
			dir := t.TempDir()
			ffs := &removeFailFS{FS: storage.OSFS{}, dir: failDir}
			ffs.armed.Store(failDir != "")
			cp, err := storage.OpenLocal(dir, storage.LocalOptions{FS: ffs})
			if err != nil {
				t.Fatal(err)
			}
			src := &reviewSrc{seqSource: newSeq(1000, 5, 4)}
			sink := newCheckingSink()
			sink.stopAt = 40
			opts := []Option{WithCheckpoint(cp), WithSink(sink), WithStatePartitions(3), WithMinBatchesToRetain(3), WithSnapshotEvery(1)}
			mk := func(s Source) *Stream {
				return ReadStream(s).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
			}
			q, err := NewQuery(mk(src), append(opts, WithTrigger(Every(0)))...)
			if err != nil {
				t.Fatal(err)
			}
			sink.q.Store(q)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err = q.Run(ctx)
			switch {
			case failDir == "" && err != nil:
				t.Fatal(err)
			case failDir != "" && (err == nil || !ffs.failed.Load()):
				t.Fatalf("run: %v (fault injected: %v), want the purge's error", err, ffs.failed.Load())
			}
			ffs.armed.Store(false)
			cp2, err := storage.OpenLocal(dir, storage.LocalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			src2 := &reviewSrc{seqSource: newSeq(300, 5, 4)}
			if _, err := runQuery(t, mk(src2), WithCheckpoint(cp2), WithSink(sink), WithStatePartitions(3), WithMinBatchesToRetain(3), WithSnapshotEvery(1), WithTrigger(AvailableNow())); err != nil {
				t.Fatal(err)
			}
			sink.check(t)
			if got, want := fmt.Sprint(finalTotals(sink.Sink)), fmt.Sprint(wantTotals(300, 4)); got != want {
				t.Fatalf("totals\n got %s\nwant %s", got, want)
			}
			ids := sink.BatchIDs()
			for i, id := range ids {
				if int64(i) != id {
					t.Fatalf("batch ids not contiguous: %v", ids)
				}
			}
		})
	}
}
