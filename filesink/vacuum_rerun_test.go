package filesink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/storage"
)

// vacuumRaceStore wraps a table store: it can refuse log writes (a crash
// before the commit) and run a hook right after a full listing.
type vacuumRaceStore struct {
	storage.Store
	failLog   bool
	afterList func()
}

func (s *vacuumRaceStore) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	if s.failLog && strings.HasPrefix(name, LogDir+"/") {
		return errors.New("injected: crash before the log entry")
	}
	return s.Store.PutIfAbsent(ctx, name, data)
}

func (s *vacuumRaceStore) List(ctx context.Context, prefix string) ([]storage.ObjectInfo, error) {
	out, err := s.Store.List(ctx, prefix)
	if prefix == "" && s.afterList != nil {
		hook := s.afterList
		s.afterList = nil
		hook()
	}
	return out, err
}

// Regression: Vacuum chose a crashed attempt's file of batch 1 from its
// listing, the batch's re-run rewrote that same name and committed it
// before Vacuum's delete, and Vacuum then deleted a file of the committed
// version, losing batch 1's rows; now the committed table still reads all
// 20 rows after that Vacuum.
//
// Before the fix: Vacuum decides from one listing, then deletes. A file left by a
// crashed attempt of batch N is old and unlisted, so it is chosen; if the
// query re-runs batch N between Vacuum's listing and its delete (a restart
// while a scheduled vacuum runs: on S3 a large table's listing takes long),
// the re-run overwrites that very name (names are deterministic) and
// commits it, and Vacuum then deletes a file of the committed version:
// batch N's rows are gone. "olderThan must exceed the longest batch" does
// not cover it: the age Vacuum saw is the crashed attempt's. Vacuum should
// re-check a candidate (age and log) just before deleting it, or the
// re-run should not reuse an old attempt's names.
func TestVacuumKeepsFileReRunCommittedDuringIt(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table, dir := openTable(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

	s, err := New(table)
	if err != nil {
		t.Fatal(err)
	}
	addBatch(t, ctx, s, mem, schema, 0, 0, 10, 10)

	// Batch 1's first attempt writes its file, then dies before the log.
	crashing := &vacuumRaceStore{Store: table, failLog: true}
	c, err := New(crashing)
	if err != nil {
		t.Fatal(err)
	}
	rec := makeRecord(t, mem, schema, 10, 20)
	defer rec.Release()
	if err := c.AddBatch(ctx, 1, schema, []arrow.RecordBatch{rec}); err == nil {
		t.Fatal("the injected crash did not fail batch 1")
	}
	old := time.Now().Add(-2 * time.Hour)
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(info.Name(), "part-00000000000000000001-") {
			return os.Chtimes(p, old, old)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// Vacuum lists; right then the restarted query re-runs batch 1.
	v := &vacuumRaceStore{Store: table}
	v.afterList = func() {
		r, err := New(table)
		if err != nil {
			t.Error(err)
			return
		}
		if err := r.AddBatch(ctx, 1, schema, []arrow.RecordBatch{rec}); err != nil {
			t.Errorf("re-run of batch 1: %v", err)
		}
	}
	deleted, err := Vacuum(ctx, v, time.Hour, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	err = ReadRows(ctx, table, func(File, []string, []any) error { rows++; return nil })
	if err != nil || rows != 20 {
		t.Fatalf("after Vacuum deleted %v: committed table reads %d rows of 20 (%v)", deleted, rows, err)
	}
}
