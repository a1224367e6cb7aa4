package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/onceflow/onceflow/internal/fault"
)

// Commit implements the engine's SourceCommitter: after the batch ending at
// end committed, it archives or deletes (WithCleanup) the files of every
// entry up to end not cleaned up yet and records how far it got, then
// compacts the files log when end reached a compaction boundary
// (WithLogCompactInterval).
//
// It is idempotent: a file already moved or removed is skipped; a file
// whose size or modification time differs from the record is left alone
// (the listing finds it changed, and the entry that logs the change
// cleans it up), as is one whose name the archive already holds for
// another file; a compact entry is written put-if-absent with the same
// bytes on every attempt, and the objects it replaces are deleted only
// once it is durable. A crash in the middle and a second call are
// harmless.
func (s *Source) Commit(ctx context.Context, end json.RawMessage) error {
	k, err := DecodeOffset(end)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.log == nil {
		return ErrNotOpen
	}
	if k > s.mu.latest {
		return fmt.Errorf("%w: commit logOffset %d is beyond the files log (latest %d)", ErrBadOffset, k, s.mu.latest)
	}
	if err := s.cleanupThrough(ctx, k); err != nil {
		return err
	}
	return s.compactThrough(ctx, k)
}

// cleanupThrough archives or deletes the files of the entries up to k not
// cleaned up yet, then records how far it got. s.mu is held.
func (s *Source) cleanupThrough(ctx context.Context, k int64) error {
	cl := s.cfg.cleanup
	if cl == (Cleanup{}) || k <= s.mu.cleaned {
		return nil
	}
	if cl.archive != "" {
		if err := os.MkdirAll(cl.archive, 0o755); err != nil {
			return fmt.Errorf("files: create archive: %w", err)
		}
	}
	for j := s.mu.cleaned + 1; j <= k; j++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A forgotten entry (WithMaxFileAge) has no files left to name.
		e := s.mu.entries[j]
		for i, f := range e.Files {
			if err := s.cleanOne(f); err != nil {
				return err
			}
			if i == 0 {
				fault.Point(fault.FilesMidCleanup)
			}
		}
		for _, c := range e.Changed {
			if err := s.cleanOne(c.FileRecord); err != nil {
				return err
			}
		}
	}
	var errs []error
	errs = append(errs, syncDir(s.dir))
	if cl.archive != "" {
		errs = append(errs, syncDir(cl.archive))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("files: cleanup through %d: %w", k, err)
	}
	if err := s.putMark(ctx, max(1, s.mu.markVersion), k); err != nil {
		return fmt.Errorf("files: record cleanup through %d: %w", k, err)
	}
	s.mu.cleaned = k
	return nil
}

// putMark writes the cleanup object. s.mu is held.
func (s *Source) putMark(ctx context.Context, version int, through int64) error {
	mark, _ := json.Marshal(cleanupMark{Version: version, Through: through})
	if err := s.mu.store.Put(ctx, cleanupName, mark); err != nil {
		return err
	}
	s.mu.markVersion = version
	return nil
}

func (s *Source) cleanOne(f FileRecord) error {
	path := filepath.Join(s.dir, f.Name)
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // cleaned up before a crash
	}
	if err != nil {
		return fmt.Errorf("files: cleanup: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() != f.Size || st.ModTime().UnixNano() != f.ModTime {
		// Changed since this record: the listing fails on it, or logs the
		// change in a later entry whose cleanup handles it.
		return nil
	}
	if s.cfg.cleanup.remove {
		err = os.Remove(path)
	} else {
		dst := filepath.Join(s.cfg.cleanup.archive, f.Name)
		if ast, aerr := os.Lstat(dst); aerr == nil && (ast.Size() != f.Size || ast.ModTime().UnixNano() != f.ModTime) {
			// The archive holds an earlier file of this name (one a later
			// listing found changed, or a forgotten name taken again):
			// never replace it, a re-read of its entry needs it. This one
			// stays in place; the listing finds it as recorded.
			return nil
		}
		err = os.Rename(path, dst)
		if errors.Is(err, syscall.EXDEV) {
			err = moveAcross(path, dst)
		}
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("files: cleanup: %w", err)
	}
	return nil
}

// moveAcross moves src to dst on another file system: copy to a temporary
// file beside dst, fsync, rename into place, then remove src. A crash
// leaves src in place (the next cleanup copies it again) or both copies.
func moveAcross(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	err = errors.Join(err, out.Sync(), out.Close())
	if err == nil {
		// Keep the modification time, which identifies the copy as the
		// recorded file (cleanOne, after a crash that left both).
		var st os.FileInfo
		if st, err = in.Stat(); err == nil {
			err = os.Chtimes(tmp, st.ModTime(), st.ModTime())
		}
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return err
	}
	return os.Remove(src)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
