package iceberg

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/onceflow/onceflow/internal/testenv"
)

func TestSinkUpdateModeUpsertsByKey(t *testing.T) {
	cat := sqliteCatalog(t)
	s := newTestSink(t, cat, "lake.totals", "q", WithMode(Update), WithKeys("i"))
	addBatch(t, s, 0, 0, 10)
	addBatch(t, s, 1, 5, 15) // rows 5..9 again: updated, not duplicated
	addBatch(t, s, 1, 5, 15) // replay
	if got := tableInts(t, cat, "lake.totals", "i"); !slices.Equal(got, seq(0, 15)) {
		t.Fatalf("rows = %v, want 0..14 once each", got)
	}
}

func TestSinkCompleteModeReplacesTable(t *testing.T) {
	cat := sqliteCatalog(t)
	s := newTestSink(t, cat, "lake.all", "q", WithMode(Complete))
	addBatch(t, s, 0, 0, 10)
	addBatch(t, s, 1, 3, 7)
	addBatch(t, s, 1, 3, 7)
	if got := tableInts(t, cat, "lake.all", "i"); !slices.Equal(got, seq(3, 7)) {
		t.Fatalf("rows = %v, want 3..6", got)
	}
}

// lossyCatalog commits like its inner catalog, but on the calls flagged
// it reports a failure after the commit took effect (a lost response).
type lossyCatalog struct {
	catalog.Catalog
	loseNext atomic.Int32
	lost     atomic.Int32
}

func (c *lossyCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	t, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(t.Identifier(), t.Metadata(), t.MetadataLocation(), t.FS, c), nil
}

func (c *lossyCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	m, loc, err := c.Catalog.CommitTable(ctx, ident, reqs, ups)
	if err == nil && c.loseNext.Load() > 0 {
		c.loseNext.Add(-1)
		c.lost.Add(1)
		return nil, "", errors.New("read tcp 127.0.0.1: connection reset by peer")
	}
	return m, loc, err
}

// Regression: a commit whose response was lost was retried and appended
// the batch's files twice; now the sink reloads the table, finds the batch
// in the branch's history and stops.
func TestSinkUnknownCommitOutcomeIsNotRepeated(t *testing.T) {
	cat := sqliteCatalog(t)
	lossy := &lossyCatalog{Catalog: cat.cat}
	cat.cat = lossy
	s := newTestSink(t, cat, "lake.u", "q")
	addBatch(t, s, 0, 0, 5)
	lossy.loseNext.Store(1)
	addBatch(t, s, 1, 5, 10)
	if lossy.lost.Load() != 1 {
		t.Fatal("no response was lost")
	}
	if got := tableInts(t, cat, "lake.u", "i"); !slices.Equal(got, seq(0, 10)) {
		t.Fatalf("rows = %v, want 0..9 once each", got)
	}
}

func TestSinkOnPostgresCatalog(t *testing.T) {
	url := testenv.PGURL(t)
	ctx := context.Background()
	cat, err := OpenCatalog(ctx, url, WithWarehouse(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	name := "lake.pay"
	s := newTestSink(t, cat, name, "q")
	addBatch(t, s, 0, 0, 5)
	addBatch(t, s, 0, 0, 5)
	addBatch(t, s, 1, 5, 9)
	if got := tableInts(t, cat, name, "i"); !slices.Equal(got, seq(0, 9)) {
		t.Fatalf("rows = %v", got)
	}
	if strings.Contains(cat.Description(), "@") {
		t.Fatalf("description carries credentials: %s", cat.Description())
	}
}

func TestCredentialsNeverInErrors(t *testing.T) {
	ctx := context.Background()
	_, err := OpenCatalog(ctx, "postgres://user:s3cretpw@127.0.0.1:1/db?connect_timeout=1")
	if err == nil {
		cat, _ := OpenCatalog(ctx, "postgres://user:s3cretpw@127.0.0.1:1/db?connect_timeout=1")
		_, err = cat.LoadTable(ctx, "a.b")
	}
	if err == nil || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("error = %v", err)
	}
	if _, err := OpenCatalog(ctx, "mysql://u:s3cretpw@h/db"); err == nil || strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("error = %v", err)
	}
	cat, err := OpenCatalog(ctx, "sqlite:"+t.TempDir()+"/c.db", WithWarehouse("s3://nobucket-here/wh"),
		WithS3(S3Config{Endpoint: "http://127.0.0.1:1", AccessKeyID: "AKIAEXAMPLEKEY", SecretAccessKey: "veryS3cretValue", PathStyle: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	s := newTestSink(t, cat, "lake.t", "q")
	rec := rows(t, 0, 3)
	defer rec.Release()
	err = s.AddBatch(ctx, 0, testSchema, []arrow.RecordBatch{rec})
	if err == nil || strings.Contains(err.Error(), "veryS3cretValue") || strings.Contains(err.Error(), "AKIAEXAMPLEKEY") {
		t.Fatalf("error = %v", err)
	}
}

// racingCatalog lets another writer commit just before the first commit
// it forwards, so that commit loses the compare-and-swap.
type racingCatalog struct {
	catalog.Catalog
	before func()
	once   atomic.Bool
}

func (c *racingCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	t, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(t.Identifier(), t.Metadata(), t.MetadataLocation(), t.FS, c), nil
}

func (c *racingCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	if c.once.CompareAndSwap(false, true) {
		c.before()
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, ups)
}

// A commit that loses the race to another writer is retried on the new
// head after the sink looked for its batch: both writers' rows are in,
// once.
func TestSinkLostRaceIsRetriedOnNewHead(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "catalog.db")
	open := func() *Catalog {
		c, err := OpenCatalog(ctx, "sqlite:"+db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	catA, catB := open(), open()
	a := newTestSink(t, catA, "lake.r", "qa")
	addBatch(t, a, 0, 0, 5)
	b := newTestSink(t, catB, "lake.r", "qb")
	racing := &racingCatalog{Catalog: catA.cat, before: func() { addBatch(t, b, 0, 100, 105) }}
	catA.cat = racing
	addBatch(t, a, 1, 5, 10)
	want := append(seq(0, 10), seq(100, 105)...)
	if got := tableInts(t, catA, "lake.r", "i"); !slices.Equal(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
	tbl, _ := catA.LoadTable(ctx, "lake.r")
	if n := len(tbl.Metadata().Snapshots()); n != 3 {
		t.Fatalf("%d snapshots, want 3 (a0, b0, a1)", n)
	}
}
