package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

// A join (two named stores) run with a restart after every batch, small
// retention and snapshots: its deltas are bundled per store, no bundle
// outlives what retention keeps (purges spread over restarts), and a fork
// from a late batch replays the rest as the first run did (the fork
// copies both named stores' folders, state/j/<p>/left and right).
func TestReviewBundleJoinRestartsPurgeFork(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	left, right := jScript(rng, 14)
	l, r := newJSource("l", left), newJSource("r", right)
	sink := memsink.New("out")
	cp := localStore(t)
	opts := func() []Option {
		return []Option{WithCheckpoint(cp), WithSink(sink), WithTrigger(Once()), WithStatePartitions(3), WithSnapshotEvery(2), WithMinBatchesToRetain(3)}
	}
	for stop := 1; stop <= len(left); stop++ {
		l.limit.Store(int64(stop))
		r.limit.Store(int64(stop))
		if _, err := runQuery(t, joinStream(l, r, FullOuter, 5*time.Second, -5*time.Second, 10*time.Second), opts()...); err != nil {
			t.Fatalf("run %d: %v", stop, err)
		}
	}
	ids := sink.BatchIDs()
	if len(ids) < 10 {
		t.Fatalf("batches %v", ids)
	}
	bundles := map[string]int{}
	for _, n := range listNames(t, cp) {
		if !strings.HasPrefix(n, "state/") || !strings.HasSuffix(n, ".delta") {
			continue
		}
		dir := n[:strings.LastIndex(n, "/")]
		if !strings.Contains(dir, "/deltas") {
			t.Errorf("%s: a delta outside the bundles", n)
		}
		bundles[dir]++
	}
	if len(bundles) != 2 || bundles["state/j/deltas/left"] == 0 || bundles["state/j/deltas/right"] == 0 {
		t.Fatalf("bundle folders %v, want state/j/deltas/left and right", bundles)
	}
	for dir, n := range bundles {
		if n > 6 {
			t.Errorf("%s holds %d bundles after %d batches with 3 retained", dir, n, len(ids))
		}
	}

	from := ids[len(ids)-2]
	dst := localStore(t)
	stats, err := forkCheckpoint(context.Background(), cp, dst, from, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatalf("fork of a join from batch %d: %v", from, err)
	}
	if stats.StateFiles == 0 {
		t.Fatalf("fork copied no state file: %+v", stats)
	}
	for _, n := range listNames(t, dst) {
		if strings.HasPrefix(n, "state/j/0/") && !strings.HasPrefix(n, "state/j/0/left/") && !strings.HasPrefix(n, "state/j/0/right/") {
			t.Errorf("%s: a file outside the join's named stores", n)
		}
	}
	l2, r2 := newJSource("l", left), newJSource("r", right)
	l2.limit.Store(int64(len(left)))
	r2.limit.Store(int64(len(right)))
	replay := memsink.New("replay")
	if _, err := runQuery(t, joinStream(l2, r2, FullOuter, 5*time.Second, -5*time.Second, 10*time.Second),
		WithCheckpoint(dst), WithSink(replay), WithTrigger(AvailableNow()), WithStatePartitions(3)); err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, id := range replay.BatchIDs() {
		if id > ids[len(ids)-1] {
			continue // a no-data batch the watermark drives, after what the Once runs made
		}
		for _, r := range replay.Batch(id) {
			got = append(got, fmt.Sprint(id, r))
		}
	}
	for _, id := range ids {
		if id >= from {
			for _, r := range sink.Batch(id) {
				want = append(want, fmt.Sprint(id, r))
			}
		}
	}
	if a, b := strings.Join(got, "\n"), strings.Join(want, "\n"); a != b {
		t.Errorf("fork replay\n%s\nfirst run\n%s", a, b)
	}
}

// A chain of two operators (window, then group by), restarted after every
// batch with small retention: both operators' bundles are purged, and a
// fork of the checkpoint replays its last batches as the first run did.
func TestReviewBundleChainPurgeAndFork(t *testing.T) {
	c := batch.Col
	stream := func(s []Source) *Stream {
		return ReadStream(s...).WithWatermark("ts", 3*time.Second).
			GroupByWindow(TumblingWindow("ts", 5*time.Second), "k").ID("w").Agg(batch.Sum(c("v")).As("sv")).
			GroupBy("window_end").ID("g").Agg(batch.First(c("k")).As("fk"), batch.Sum(c("sv")).As("total"))
	}
	scripts := wholeScripts(9, 1, 12)
	var cp storage.Store
	res := wholeRun(t, stream, scripts, wholeCfg{mode: Append, ops: []string{"w", "g"}, parts: 3, fromVersion: 11,
		opts:  []Option{WithMinBatchesToRetain(3)},
		store: func(s storage.Store) storage.Store { cp = s; return s }}, wholeOracle)
	if res.batches < 12 {
		t.Fatalf("%d batches", res.batches)
	}
	bundles := map[string]int{}
	for _, n := range listNames(t, cp) {
		if strings.HasPrefix(n, "state/") && strings.HasSuffix(n, ".delta") {
			bundles[n[:strings.LastIndex(n, "/")]]++
		}
	}
	for _, dir := range []string{"state/w/deltas", "state/g/deltas"} {
		if n := bundles[dir]; n == 0 || n > 6 {
			t.Errorf("%s holds %d bundles after %d batches with 3 retained (%v)", dir, n, res.batches, bundles)
		}
	}
	if len(bundles) != 2 {
		t.Errorf("delta folders %v", bundles)
	}
	from := res.batches - 2
	dst := localStore(t)
	if _, err := forkCheckpoint(context.Background(), cp, dst, from, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	replay := memsink.New("replay")
	if _, err := runQuery(t, stream([]Source{&revScript{name: "0", batches: scripts[0]}}), WithCheckpoint(dst), WithSink(replay),
		WithTrigger(AvailableNow()), WithOutputMode(Append), WithStatePartitions(3), WithSnapshotEvery(3)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, id := range replay.BatchIDs() {
		for _, r := range replay.Batch(id) {
			got = append(got, fmt.Sprint(id, r))
		}
	}
	var want []string
	for _, line := range res.out {
		var id int64
		if _, err := fmt.Sscan(line, &id); err == nil && id >= from {
			want = append(want, line)
		}
	}
	if a, b := strings.Join(got, "\n"), strings.Join(want, "\n"); a != b || a == "" {
		t.Errorf("fork replay\n%s\nfirst run\n%s", a, b)
	}
}
