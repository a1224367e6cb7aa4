package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/source/files"
)

// Regression: checkRestart compared only the number of sources, so swapping
// two sources handed each the other's position and delivered committed
// payments again; now such a restart is refused with ErrIncompatibleRestart
// (or delivers only the new rows).
//
// Before the fix: checkRestart compares only the number of sources, not which
// source is at which index. Offsets (and a files source's own log under
// sources/<i>) are bound to the index, so swapping two sources between
// runs hands each source the other's position: here both landing
// directories are read again from the start, and every payment already
// committed reaches the sink a second time. A restart with sources whose
// descriptions differ from offsets/N's Conf.Sources should fail with
// ErrIncompatibleRestart before planning.
func TestRestartWithSwappedSourcesIsRefused(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	landA, landB := t.TempDir(), t.TempDir()
	write := func(dir, name string, v int, minute int) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("{\"v\":%d}\n", v)), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	newSrc := func(dir string) *files.Source {
		s, err := files.New(dir, files.JSON, schema)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	write(landA, "a1.json", 1, 1)
	write(landB, "b1.json", 100, 2)

	cp := localStore(t)
	first := memsink.New("out")
	if _, err := runQuery(t, ReadStream(newSrc(landA), newSrc(landB)), WithCheckpoint(cp), WithSink(first), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(first.All()); got != "[[1] [100]]" {
		t.Fatalf("first run wrote %s", got)
	}

	write(landA, "a2.json", 2, 3)
	second := memsink.New("out")
	_, err := runQuery(t, ReadStream(newSrc(landB), newSrc(landA)), WithCheckpoint(cp), WithSink(second), WithTrigger(AvailableNow()))
	if errors.Is(err, ErrIncompatibleRestart) {
		return // refused: the fix
	}
	if err != nil {
		t.Fatalf("restart with swapped sources: %v", err)
	}
	// Accepted: then only the new file may reach the sink.
	if got := fmt.Sprint(second.All()); got != "[[2]]" {
		t.Fatalf("restart with swapped sources was accepted and wrote %s; want only the new payment [[2]] (or ErrIncompatibleRestart): committed payments were delivered twice", got)
	}
}
