package files

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/cespare/xxhash/v2"
)

// The digest of taken bytes is XXH64 (seed 0), written as 16 hex digits
// in the canonical, big-endian order that xxhsum -H1 prints. It detects
// accidental changes (a rewrite that keeps size and modification time); a
// collision by chance is about 2^-64 per change. It is not cryptographic:
// whoever can write the landing directory can add files anyway. SHA-256
// runs at about a tenth of its speed on CPUs without SHA instructions
// (BenchmarkDigest/hash), and every taken byte is hashed twice (take and
// Read).

// newDigest returns the hash of taken bytes.
func newDigest() hash.Hash { return xxhash.New() }

// sumHex renders h's digest as the log records it.
func sumHex(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// hashBuf is the read size of hashing.
const hashBuf = 256 << 10

// digest opens the landing file name and returns its record: size and
// modification time from the open file, and the XXH64 of all its bytes.
// With at >= 0 it also returns the XXH64 of its first at bytes ("" when
// the file is shorter). ok is false when the file vanished or is no longer
// a regular file, or shrank while it was hashed (the next listing looks
// again). s.mu is held.
func (s *Source) digest(name string, at int64) (rec FileRecord, prefix string, ok bool, err error) {
	path := filepath.Join(s.dir, name)
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return rec, "", false, nil
	}
	if err != nil {
		return rec, "", false, fmt.Errorf("files: hash %s: %w", path, err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return rec, "", false, fmt.Errorf("files: hash %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return rec, "", false, nil
	}
	size := st.Size()
	h := newDigest()
	buf := make([]byte, hashBuf)
	done := int64(0)
	if at >= 0 && at <= size {
		if err := hashN(h, fh, at, buf); err != nil {
			return rec, "", false, s.hashErr(path, err)
		}
		prefix, done = sumHex(h), at
	}
	if err := hashN(h, fh, size-done, buf); err != nil {
		return rec, "", false, s.hashErr(path, err)
	}
	rec = FileRecord{Name: name, Size: size, ModTime: st.ModTime().UnixNano(), XXH64: sumHex(h)}
	return rec, prefix, true, nil
}

// hashErr is nil for a file that shrank while it was hashed: the caller
// skips it this time.
func (s *Source) hashErr(path string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return fmt.Errorf("files: hash %s: %w", path, err)
}

// hashN feeds the next n bytes of r to h; io.ErrUnexpectedEOF when r ends
// first.
func hashN(h hash.Hash, r io.Reader, n int64, buf []byte) error {
	got, err := io.CopyBuffer(h, io.LimitReader(r, n), buf)
	if err != nil {
		return err
	}
	if got < n {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// changedFile hashes the taken file name, whose listing differs from its
// newest record t, and returns its change; ok is false when it vanished,
// shrank while hashed, or is as recorded after all. s.mu is held.
func (s *Source) changedFile(name string, t takenFile) (ChangedFile, bool, error) {
	at := int64(-1)
	if t.XXH64 != "" {
		at = t.Size
	}
	rec, prefix, ok, err := s.digest(name, at)
	if err != nil || !ok {
		return ChangedFile{}, false, err
	}
	if rec.Size == t.Size && rec.ModTime == t.ModTime && (t.XXH64 == "" || rec.XXH64 == t.XXH64) {
		return ChangedFile{}, false, nil
	}
	c := ChangedFile{FileRecord: rec, Entry: t.entry, PrevSize: t.Size, PrevModTime: t.ModTime}
	if prefix != "" && prefix == t.XXH64 {
		c.From = t.Size
	}
	return c, true, nil
}
