package storage_test

import (
	"testing"

	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/storagetest"
)

func TestLocalConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		s, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
