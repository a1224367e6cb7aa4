package files

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

type benchPayment struct {
	ID          int64     `json:"id"`
	AmountCents int64     `json:"amount_cents"`
	Name        *string   `json:"name"`
	TS          time.Time `json:"ts"`
}

func benchLines(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"id":%d,"amount_cents":%d,"name":"customer-%d","ts":"2026-11-30T10:%02d:%02d.%06dZ","channel":"web"}`+"\n",
			i, i*37%100000, i%1000, i/60%60, i%60, i%1000000)
	}
	return b.Bytes()
}

// BenchmarkJSONLines compares the source's JSON-lines path with
// encoding/json decoding the same lines into a Go struct.
func BenchmarkJSONLines(b *testing.B) {
	const n = 100_000
	data := benchLines(n)
	b.Run("files.Read", func(b *testing.B) {
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a.json"), data, 0o644); err != nil {
			b.Fatal(err)
		}
		s, err := New(dir, JSON, payments(), WithAllocator(memory.NewGoAllocator()))
		if err != nil {
			b.Fatal(err)
		}
		st := checkpointB(b)
		if err := s.OpenCheckpoint(context.Background(), st); err != nil {
			b.Fatal(err)
		}
		if _, err := s.LatestOffset(context.Background(), EncodeOffset(-1)); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			got := 0
			err := s.Read(context.Background(), EncodeOffset(-1), EncodeOffset(0), func(rec arrow.RecordBatch) error {
				got += int(rec.NumRows())
				return nil
			})
			if err != nil || got != n {
				b.Fatalf("read %d rows: %v", got, err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("encoding/json-struct", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			sc := bufio.NewScanner(bytes.NewReader(data))
			got := 0
			for sc.Scan() {
				var p benchPayment
				if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
					b.Fatal(err)
				}
				got++
			}
			if got != n {
				b.Fatalf("decoded %d rows", got)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkDigest measures what recording and checking the XXH64 of the
// taken bytes costs, against the same run's baseline: Read of a version 1
// entry (no digest to check) of the same file. "take" is LatestOffset on a
// fresh checkpoint, which hashes the file once.
func BenchmarkDigest(b *testing.B) {
	const n = 100_000
	data := benchLines(n)
	dir := b.TempDir()
	path := filepath.Join(dir, "a.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	read := func(b *testing.B, s *Source) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			got := 0
			err := s.Read(ctx, EncodeOffset(-1), EncodeOffset(0), func(rec arrow.RecordBatch) error {
				got += int(rec.NumRows())
				return nil
			})
			if err != nil || got != n {
				b.Fatalf("read %d rows: %v", got, err)
			}
		}
	}
	source := func(b *testing.B, store storage.Store) *Source {
		s, err := New(dir, JSON, payments(), WithAllocator(memory.NewGoAllocator()))
		if err != nil {
			b.Fatal(err)
		}
		if err := s.OpenCheckpoint(ctx, store); err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("read/v1-no-digest", func(b *testing.B) {
		store := checkpointB(b)
		entry := fmt.Sprintf("v1\n{\"files\":[{\"name\":\"a.json\",\"size\":%d,\"modTime\":%d}]}\n", st.Size(), st.ModTime().UnixNano())
		if err := store.PutIfAbsent(ctx, offsetlog.FileName(logDir, 0), []byte(entry)); err != nil {
			b.Fatal(err)
		}
		read(b, source(b, store))
	})
	b.Run("read/v2-digest", func(b *testing.B) {
		s := source(b, checkpointB(b))
		if _, err := s.LatestOffset(ctx, EncodeOffset(-1)); err != nil {
			b.Fatal(err)
		}
		read(b, s)
	})
	// The digest alone, and SHA-256 over the same bytes for comparison.
	for _, h := range []struct {
		name string
		new  func() hash.Hash
	}{{"hash/xxh64", newDigest}, {"hash/sha256", sha256.New}} {
		b.Run(h.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				d := h.new()
				d.Write(data)
				d.Sum(nil)
			}
		})
	}
	b.Run("take", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			b.StopTimer()
			s := source(b, checkpointB(b))
			b.StartTimer()
			if off, err := s.LatestOffset(ctx, EncodeOffset(-1)); err != nil || string(off) != `{"logOffset":0}` {
				b.Fatalf("LatestOffset %s, %v", off, err)
			}
		}
	})
}
