package files

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
)

// hashBuf is the read size of hashing.
const hashBuf = 256 << 10

// digest opens the landing file name and returns its record: size and
// modification time from the open file, and the SHA-256 of all its bytes.
// With at >= 0 it also returns the SHA-256 of its first at bytes ("" when
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
	h := sha256.New()
	buf := make([]byte, hashBuf)
	done := int64(0)
	if at >= 0 && at <= size {
		if err := hashN(h, fh, at, buf); err != nil {
			return rec, "", false, s.hashErr(path, err)
		}
		prefix, done = hex.EncodeToString(h.Sum(nil)), at
	}
	if err := hashN(h, fh, size-done, buf); err != nil {
		return rec, "", false, s.hashErr(path, err)
	}
	rec = FileRecord{Name: name, Size: size, ModTime: st.ModTime().UnixNano(), SHA256: hex.EncodeToString(h.Sum(nil))}
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
	if t.SHA256 != "" {
		at = t.Size
	}
	rec, prefix, ok, err := s.digest(name, at)
	if err != nil || !ok {
		return ChangedFile{}, false, err
	}
	if rec.Size == t.Size && rec.ModTime == t.ModTime && (t.SHA256 == "" || rec.SHA256 == t.SHA256) {
		return ChangedFile{}, false, nil
	}
	c := ChangedFile{FileRecord: rec, Entry: t.entry, PrevSize: t.Size, PrevModTime: t.ModTime}
	if prefix != "" && prefix == t.SHA256 {
		c.From = t.Size
	}
	return c, true, nil
}
