package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/onceflow/onceflow/storage"
)

// lockCheckpoint takes an exclusive lock on a local checkpoint, so a second
// driver fails at once instead of at its first write. The kernel drops the
// lock when the process dies, SIGKILL included. Object stores have no lock:
// there the put-if-absent of offsets/N and commits/N (which carry the run
// id) and the driver's checks that no other driver has moved on decide, and
// the loser stops with ErrConcurrentDriver. locked reports whether a lock
// was taken.
func lockCheckpoint(store storage.Store) (release func() error, locked bool, err error) {
	dir, ok := storage.LocalDir(store)
	if !ok {
		return func() error { return nil }, false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("engine: create checkpoint %s: %w", dir, err)
	}
	path := filepath.Join(dir, ".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("engine: open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, false, fmt.Errorf("%w: %s is locked by another driver", ErrConcurrentDriver, dir)
		}
		return nil, false, fmt.Errorf("engine: lock %s: %w", path, err)
	}
	return f.Close, true, nil
}
