package files

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// compactDir is the folder of compact entries inside the source's
// checkpoint store: compact/<c> holds every live entry up to c.
const compactDir = "compact"

// noneTaken is the newest modification time before any file was taken.
const noneTaken = math.MinInt64

// compactEntry is the content of compact/<c>: every entry up to c that is
// still remembered, with its files, so that compact/<c> replaces the plain
// entries 0…c (and any older compact entry) for reading and for the taken
// set. An entry id up to Through that Entries lacks was forgotten
// (WithMaxFileAge).
type compactEntry struct {
	Version int   `json:"version,omitempty"` // logVersion; 0 (absent) in version 1
	Through int64 `json:"through"`
	// NewestModTime is the newest modification time (Unix nanoseconds) of
	// any file entries 0…Through took, forgotten ones included.
	NewestModTime int64 `json:"newestModTime"`
	// MaxFileAge is the WithMaxFileAge (nanoseconds) this compaction
	// applied; 0 when it forgot nothing by age.
	MaxFileAge int64 `json:"maxFileAge,omitempty"`
	// ForgottenModTime is the newest modification time of any file of an
	// entry this or an earlier compaction forgot; absent when none was.
	// The listing never takes a file modified at or before it, whatever
	// WithMaxFileAge a later run sets: its name may be a forgotten one.
	ForgottenModTime *int64         `json:"forgottenModTime,omitempty"`
	Entries          []compactedLog `json:"entries"`
}

// compactedLog is one entry inside a compact entry.
type compactedLog struct {
	K       int64         `json:"k"`
	Files   []FileRecord  `json:"files"`
	Changed []ChangedFile `json:"changed,omitempty"`
}

// loaded is what OpenCheckpoint rebuilds from the log.
type loaded struct {
	entries       map[int64]LogEntry
	latest        int64 // highest entry id, -1 for none
	compacted     int64 // id of the newest compact entry, -1 for none
	newest        int64 // newest taken modification time, noneTaken for none
	compactNewest int64 // the newest compact entry's NewestModTime, noneTaken for none
	forgotten     int64 // the newest compact entry's ForgottenModTime, noneTaken for none
	stale         bool  // objects the newest compact entry made obsolete remain
}

// loadAttempts bounds how often loadLog starts over because a newer
// compact entry appeared while it read.
const loadAttempts = 20

// loadLog reads the newest compact entry and the plain entries after it.
// It writes nothing, so a read-only tool (the audit) may call it next to a
// live query: when a compaction of that query deletes, between its
// listing and its reads, the compact entry or the plain entries it was
// reading, a newer compact entry exists, and it reads again from that one.
// The engine's own open sees no such race (one driver at a time) and pays
// one more listing.
func loadLog(ctx context.Context, store storage.Store, log *offsetlog.Log[LogEntry], clog *offsetlog.Log[compactEntry]) (loaded, error) {
	for attempt := 1; ; attempt++ {
		l, base, err := loadOnce(ctx, store, log, clog)
		if attempt == loadAttempts || ctx.Err() != nil {
			return l, err
		}
		// A compaction that ran meanwhile may also have left no error,
		// only fewer entries (its plain entries deleted after the
		// listing of compact entries): check that none did.
		cids, lerr := clog.List(ctx)
		if lerr != nil {
			if err != nil {
				return l, err
			}
			return l, lerr
		}
		// A listing is no snapshot: one that runs while a compaction
		// renames compact/<c+1> into place and deletes compact/<c> can
		// see neither, so an empty listing after a failed read is a race
		// too (compaction never leaves the folder empty once it wrote to
		// it).
		raced := len(cids) > 0 && cids[len(cids)-1] > base
		if err != nil && (len(cids) == 0 || cids[len(cids)-1] != base) {
			raced = true
		}
		if !raced {
			return l, err
		}
	}
}

// loadOnce is one attempt of loadLog; base is the compact entry it
// started from, -1 for none.
func loadOnce(ctx context.Context, store storage.Store, log *offsetlog.Log[LogEntry], clog *offsetlog.Log[compactEntry]) (l loaded, base int64, err error) {
	base = -1
	l = loaded{entries: map[int64]LogEntry{}, latest: -1, compacted: -1, newest: noneTaken, compactNewest: noneTaken, forgotten: noneTaken}
	cids, err := clog.List(ctx)
	if err != nil {
		return l, base, err
	}
	if n := len(cids); n > 0 {
		c := cids[n-1]
		base = c
		ce, err := clog.Get(ctx, c)
		if err != nil {
			return l, base, err
		}
		name := store.URL() + "/" + offsetlog.FileName(compactDir, c)
		if ce.Through != c {
			return l, base, &offsetlog.CorruptionError{File: name, Reason: fmt.Sprintf("through %d does not match the entry id %d", ce.Through, c)}
		}
		prev := int64(-1)
		for _, e := range ce.Entries {
			if e.K <= prev || e.K > c {
				return l, base, &offsetlog.CorruptionError{File: name, Reason: fmt.Sprintf("entry %d out of order or beyond %d", e.K, c)}
			}
			prev = e.K
			l.entries[e.K] = LogEntry{Version: ce.Version, Files: e.Files, Changed: e.Changed}
		}
		l.compacted, l.latest, l.newest, l.compactNewest = c, c, ce.NewestModTime, ce.NewestModTime
		if ce.ForgottenModTime != nil {
			l.forgotten = *ce.ForgottenModTime
		}
		l.stale = n > 1
	}
	ids, err := log.List(ctx)
	if err != nil {
		return l, base, err
	}
	for _, id := range ids {
		if id <= l.compacted {
			l.stale = true // left by a crash between the compaction and its purge
			continue
		}
		if id != l.latest+1 {
			return l, base, fmt.Errorf("%w: %s/%s is missing (the log holds entry %d)", offsetlog.ErrCorrupt, store.URL(), offsetlog.FileName(logDir, l.latest+1), id)
		}
		e, err := log.Get(ctx, id)
		if err != nil {
			return l, base, err
		}
		l.entries[id] = e
		l.newest = max(l.newest, newestIn(e))
		l.latest = id
	}
	return l, base, nil
}

// compactBoundary returns the newest entry id c <= k that a compaction
// every n entries ends at ((c+1) a multiple of n), or -1 for none.
func compactBoundary(k int64, n int) int64 {
	return (k+1)/int64(n)*int64(n) - 1
}

// compactThrough compacts the log when committed entry k reached a
// compaction boundary past the newest compact entry, and deletes the
// objects that compact entry makes obsolete. s.mu is held.
func (s *Source) compactThrough(ctx context.Context, k int64) error {
	c := compactBoundary(k, s.cfg.compactEvery)
	if c > s.mu.compacted {
		if err := s.writeCompact(ctx, c); err != nil {
			return err
		}
	}
	if !s.mu.stale {
		return nil
	}
	// Before the first plain entry goes, a version 2 cleanup object makes
	// builds that predate compaction refuse the checkpoint rather than
	// take the compacted files again.
	if s.mu.markVersion < 2 {
		if err := s.putMark(ctx, 2, s.mu.cleaned); err != nil {
			return fmt.Errorf("files: mark the log compacted: %w", err)
		}
	}
	// The plain entries first: once they are gone, the older compact
	// entries are unreachable too (OpenCheckpoint reads only the newest).
	if _, err := s.mu.log.Purge(ctx, s.mu.compacted+1); err != nil {
		return fmt.Errorf("files: purge the log through %d: %w", s.mu.compacted, err)
	}
	fault.Point(fault.FilesAfterLogPurge)
	if _, err := s.mu.clog.Purge(ctx, s.mu.compacted); err != nil {
		return fmt.Errorf("files: purge compact entries before %d: %w", s.mu.compacted, err)
	}
	s.mu.stale = false
	return nil
}

// writeCompact writes compact/<c> from the entries in memory and makes it
// the log's base. Its bytes are a function of entries 0…c and the options
// alone, so a second attempt after a crash writes the same object. s.mu is
// held.
func (s *Source) writeCompact(ctx context.Context, c int64) error {
	newest := s.mu.compactNewest
	for j := s.mu.compacted + 1; j <= c; j++ {
		if e, ok := s.mu.entries[j]; ok {
			newest = max(newest, newestIn(e))
		}
	}
	ce := compactEntry{Version: logVersion, Through: c, NewestModTime: newest, Entries: []compactedLog{}}
	var cutoff int64 = noneTaken
	if s.cfg.maxAge > 0 && newest != noneTaken {
		cutoff = newest - int64(s.cfg.maxAge)
		ce.MaxFileAge = int64(s.cfg.maxAge)
	}
	var forgotten []int64
	forgottenMT := s.mu.forgotten
	for _, j := range s.liveThrough(c) {
		e := s.mu.entries[j]
		if cutoff != noneTaken && newestIn(e) < cutoff {
			forgotten = append(forgotten, j)
			forgottenMT = max(forgottenMT, newestIn(e))
			continue
		}
		ce.Entries = append(ce.Entries, compactedLog{K: j, Files: e.Files, Changed: e.Changed})
	}
	if forgottenMT != noneTaken {
		ce.ForgottenModTime = &forgottenMT
	}
	if err := s.mu.clog.Add(ctx, c, ce); err != nil {
		return fmt.Errorf("files: compact the log through %d: %w", c, err)
	}
	fault.Point(fault.FilesAfterCompact)
	if len(forgotten) > 0 {
		for _, j := range forgotten {
			delete(s.mu.entries, j)
		}
		s.mu.taken = takenFiles(s.mu.entries)
	}
	s.mu.compacted, s.mu.compactNewest, s.mu.forgotten, s.mu.stale = c, newest, forgottenMT, true
	return nil
}

// liveThrough returns the ids of the remembered entries up to c, in order.
// s.mu is held.
func (s *Source) liveThrough(c int64) []int64 {
	ids := make([]int64, 0, len(s.mu.entries))
	for j := range s.mu.entries {
		if j <= c {
			ids = append(ids, j)
		}
	}
	slices.Sort(ids)
	return ids
}

// newestIn is the newest modification time of the files entry e took or
// logged as changed, noneTaken for none.
func newestIn(e LogEntry) int64 {
	newest := int64(noneTaken)
	for _, f := range e.Files {
		newest = max(newest, f.ModTime)
	}
	for _, c := range e.Changed {
		newest = max(newest, c.ModTime)
	}
	return newest
}

// takenFiles is the newest record of every name the entries took, by
// entry order: its take, or the change of the highest entry that logged
// one.
func takenFiles(entries map[int64]LogEntry) map[string]takenFile {
	ids := make([]int64, 0, len(entries))
	for k := range entries {
		ids = append(ids, k)
	}
	slices.Sort(ids)
	taken := make(map[string]takenFile)
	for _, k := range ids {
		for _, f := range entries[k].Files {
			taken[f.Name] = takenFile{FileRecord: f, entry: k}
		}
		for _, c := range entries[k].Changed {
			taken[c.Name] = takenFile{FileRecord: c.FileRecord, entry: k}
		}
	}
	return taken
}
