package storage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"
)

// SyncGroup defers the durable half of Put calls so that several of them
// become durable together, later, while the caller does something else.
//
// A Put on a local store whose context carries a group (WithSyncGroup)
// writes its temporary file and returns: the object is not in place yet,
// so neither readers nor a crash can see it. Sync then fsyncs every
// temporary file of the group at once, renames each over its name, and
// fsyncs each directory once; when Sync returns nil every Put of the group
// is in place and durable, exactly as if each had been a plain Put. Until
// then a crash leaves the old objects (and temporary files the next
// OpenLocal removes): never a torn or empty object, even for a Put that
// replaces one. Abort removes the temporary files of a group that will not
// be synced.
//
// Only Put is deferred; PutIfAbsent, PutVolatile and Delete act at once,
// and a store other than Local (S3: one PUT is already the whole write)
// ignores the group. A group is for one caller's batch of writes: Put may
// be called from many goroutines, Sync and Abort once, after the last Put.
type SyncGroup struct {
	mu struct {
		sync.Mutex
		pending []deferredPut
		open    int // temporary files held open (f != nil)
		done    bool
	}
}

// maxOpenSyncFiles bounds the temporary files a group holds open: a Put
// beyond it syncs and closes its file at once and defers only the rename,
// so a batch with many state partitions does not run out of descriptors.
const maxOpenSyncFiles = 64

// deferredPut is a temporary file, written, waiting to be renamed: still
// open and not synced (f set), or already synced and closed (f nil).
type deferredPut struct {
	l          *Local
	f          File
	tmp, final string
}

type syncGroupKey struct{}

// NewSyncGroup returns an empty group.
func NewSyncGroup() *SyncGroup { return &SyncGroup{} }

// WithSyncGroup returns a context under which Put on a local store defers
// its fsyncs and rename to g (see SyncGroup).
func WithSyncGroup(ctx context.Context, g *SyncGroup) context.Context {
	return context.WithValue(ctx, syncGroupKey{}, g)
}

func syncGroupOf(ctx context.Context) *SyncGroup {
	g, _ := ctx.Value(syncGroupKey{}).(*SyncGroup)
	return g
}

// add records a written temporary file; false when the group is already
// synced or aborted (the caller then finishes the Put itself). A file
// beyond maxOpenSyncFiles is synced (when the store syncs) and closed
// here, so that only its rename waits for Sync.
func (g *SyncGroup) add(p deferredPut) (bool, error) {
	g.mu.Lock()
	if g.mu.done {
		g.mu.Unlock()
		return false, nil
	}
	keep := g.mu.open < maxOpenSyncFiles
	if keep {
		g.mu.open++
		g.mu.pending = append(g.mu.pending, p)
	}
	g.mu.Unlock()
	if keep {
		return true, nil
	}
	var err error
	if p.l.sync {
		err = p.f.Sync()
	}
	if err = errors.Join(err, p.f.Close()); err != nil {
		_ = p.l.fs.Remove(p.tmp)
		return false, fmt.Errorf("storage: write %s: %w", p.tmp, err)
	}
	p.f = nil
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.done {
		// Synced or aborted meanwhile (a caller's misuse): finish alone.
		_ = p.l.fs.Remove(p.tmp)
		return false, nil
	}
	g.mu.pending = append(g.mu.pending, p)
	return true, nil
}

func (g *SyncGroup) take() []deferredPut {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.mu.pending
	g.mu.pending, g.mu.open, g.mu.done = nil, 0, true
	return p
}

// Sync makes every deferred Put of g durable and puts it in place: the
// temporary files are fsynced (all at once), renamed over their names in
// the order of the Puts, and their directories fsynced (each once, all at
// once). On an error the objects not yet renamed keep their old bytes and
// their temporary files are removed. A nil group has nothing to sync.
func (g *SyncGroup) Sync(ctx context.Context) error {
	if g == nil {
		return nil
	}
	pending := g.take()
	if len(pending) == 0 {
		return nil
	}
	renamed := 0
	defer func() { removeTemps(pending[renamed:]) }()
	eg, ectx := errgroup.WithContext(ctx)
	for i := range pending {
		p := &pending[i]
		eg.Go(func() error {
			if err := ectx.Err(); err != nil {
				return err
			}
			if p.f == nil {
				return nil // synced and closed when it was added
			}
			var err error
			if p.l.sync {
				err = p.f.Sync()
			}
			p.f, err = nil, errors.Join(err, p.f.Close())
			if err != nil {
				return fmt.Errorf("storage: sync %s: %w", p.tmp, err)
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	dirs := map[string]*Local{}
	for _, p := range pending {
		if err := p.l.fs.Rename(p.tmp, p.final); err != nil {
			return fmt.Errorf("storage: rename %s: %w", p.final, err)
		}
		renamed++
		dirs[filepath.Dir(p.final)] = p.l
	}
	eg, _ = errgroup.WithContext(ctx)
	var errs []error
	var mu sync.Mutex
	// Sorted, so the first failure reads the same every time.
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		eg.Go(func() error {
			if err := dirs[d].syncDir(d); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = eg.Wait()
	return errors.Join(errs...)
}

// Abort removes the temporary files of the Puts not yet synced; a later
// Put under g acts as a plain Put. Abort after Sync, or on a nil group,
// does nothing.
func (g *SyncGroup) Abort() {
	if g == nil {
		return
	}
	removeTemps(g.take())
}

func removeTemps(ps []deferredPut) {
	for _, p := range ps {
		if p.f != nil {
			_ = p.f.Close()
		}
		_ = p.l.fs.Remove(p.tmp)
	}
}
