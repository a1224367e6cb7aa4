package statestore_test

import (
	"context"
	"testing"

	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/statestore/storetest"
	"github.com/onceflow/onceflow/storage"
)

// TestModelMemoryBackend runs the backend model test (storetest, which
// statestore/pebblestore runs too) against the in-memory Store.
func TestModelMemoryBackend(t *testing.T) {
	storetest.Run(t, storetest.Config{Seeds: 2}, func(t testing.TB, dir string, o statestore.Options, committed int64, _ storetest.Store, _ bool) storetest.Store {
		if committed == -2 {
			return nil
		}
		st, err := storage.OpenLocal(dir, storage.LocalOptions{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		s, err := statestore.Open(context.Background(), st, o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
