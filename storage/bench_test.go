package storage_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
)

// BenchmarkStore measures one-object writes and reads: the local backend
// with and without fsync, and S3 when ONCEFLOW_TEST_S3_ENDPOINT is set.
//
//	go test -run '^$' -bench Store -benchtime 200x ./storage/
func BenchmarkStore(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) storage.Store
	}{
		{"local", func(b *testing.B) storage.Store { return openLocal(b, false) }},
		{"local-nosync", func(b *testing.B) storage.Store { return openLocal(b, true) }},
		{"s3", func(b *testing.B) storage.Store {
			if os.Getenv(testenv.S3EnvVar) == "" {
				b.Skip("set " + testenv.S3EnvVar + " (scripts/s3-server.sh start)")
			}
			return testenv.S3(b)
		}},
	}
	for _, be := range backends {
		for _, size := range []int{1 << 10, 1 << 20} {
			data := make([]byte, size)
			b.Run(fmt.Sprintf("%s/put-if-absent/%dKiB", be.name, size>>10), func(b *testing.B) {
				s := be.open(b)
				b.SetBytes(int64(size))
				i := 0
				for b.Loop() {
					if err := s.PutIfAbsent(b.Context(), fmt.Sprintf("offsets/%020d", i), data); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			b.Run(fmt.Sprintf("%s/get/%dKiB", be.name, size>>10), func(b *testing.B) {
				s := be.open(b)
				if err := s.Put(b.Context(), "obj", data); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				for b.Loop() {
					if _, err := s.Get(b.Context(), "obj"); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func openLocal(b *testing.B, noSync bool) storage.Store {
	s, err := storage.OpenLocal(b.TempDir(), storage.LocalOptions{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	return s
}
