package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

// Regression: a local checkpoint reached through storage.Sub took no lock,
// so a second driver ran the first one's in-flight batch beside it; now the
// second driver fails at start with ErrConcurrentDriver.
//
// Before the fix: lockCheckpoint only recognises a bare *storage.Local. A local
// checkpoint reached through storage.Sub (a folder of a local store, the
// usual way to keep several checkpoints under one root) takes no lock, so
// a second driver is not refused at start: it recovers the first driver's
// in-flight batch and runs every sink for it at the same time (and, on a
// sink that is not idempotent, delivers it twice). The first driver only
// learns at its commits/N. Unwrapping prefix views down to a Local (or a
// Store method that takes the lock) would close it.
func TestSecondDriverOnSubLocalCheckpointIsRefusedAtStart(t *testing.T) {
	root := localStore(t)
	cp := storage.Sub(root, "checkpoints/q")
	bs := &blockingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
	q1, err := NewQuery(ReadStream(newSeq(10, 0, 2)), WithCheckpoint(cp), WithSink(bs), WithTrigger(Once()))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- q1.Run(context.Background()) }()
	<-bs.entered
	second := memsink.New("b")
	q2, err := NewQuery(ReadStream(newSeq(10, 0, 2)), WithCheckpoint(storage.Sub(root, "checkpoints/q")), WithSink(second), WithTrigger(Once()))
	if err != nil {
		t.Fatal(err)
	}
	err = q2.Run(context.Background())
	close(bs.release)
	err1 := <-done
	if !errors.Is(err, ErrConcurrentDriver) {
		t.Fatalf("second driver on the same local checkpoint (through Sub): %v, want ErrConcurrentDriver at start; it ran batches %v while the first was running batch 0 (first driver then: %v)", err, second.BatchIDs(), err1)
	}
}
