package files

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/source/internal/offset"
	"github.com/onceflow/onceflow/storage"
)

// logDir is the folder of the files log inside the source's checkpoint
// store; cleanupName is the object recording how far cleanup got.
const (
	logDir      = "files"
	cleanupName = "cleanup"
)

// logVersion is the version of the files log entries this build writes
// (the "version" field of files/<k> and compact/<c>); entries without the
// field are version 1 (docs/format/files-source.md).
const logVersion = 2

// FileRecord is one file a batch took, as the files log records it.
type FileRecord struct {
	Name    string `json:"name"`    // base name in the landing directory
	Size    int64  `json:"size"`    // bytes, when taken; Read reads exactly these
	ModTime int64  `json:"modTime"` // Unix nanoseconds, when taken
	// XXH64 is the XXH64 of bytes [0, Size) when taken, 16 hex digits: Read
	// refuses other bytes. Empty in version 1 entries.
	XXH64 string `json:"xxh64,omitempty"`
}

// ChangedFile is a taken file that a later listing found with another
// size or modification time than its newest record (or, hashed, with other
// bytes). With WithDeadLetter the next entry logs it, and Read of that
// entry copies the bytes no batch read, [From, Size), to the dead-letter
// directory; without a dead-letter directory the listing fails instead.
type ChangedFile struct {
	// FileRecord is the file as the listing found it: its XXH64 covers
	// all of its Size bytes.
	FileRecord
	Entry       int64 `json:"entry"`       // the entry holding the file's previous record
	PrevSize    int64 `json:"prevSize"`    // the size that record holds
	PrevModTime int64 `json:"prevModTime"` // the modification time that record holds
	// From is the first byte no batch read: PrevSize when the file's first
	// PrevSize bytes are the recorded ones (their XXH64 matches), else 0
	// (the file was replaced, or the record has no digest).
	From int64 `json:"from"`
}

// LogEntry is the files log entry of one source batch: the files it took,
// in the order Read reads them, and the changed files it dead-letters.
type LogEntry struct {
	Version int           `json:"version,omitempty"` // logVersion; 0 (absent) in version 1
	Files   []FileRecord  `json:"files"`
	Changed []ChangedFile `json:"changed,omitempty"`
}

// takenFile is the newest record of a taken name: its take, or its newest
// change.
type takenFile struct {
	FileRecord
	entry int64 // the entry holding the record
}

// cleanupMark is the content of the cleanup object. Version 2 also says
// that plain entries of the files log may have been deleted after a
// compaction; builds that predate compaction read only version 1, so they
// refuse such a checkpoint instead of taking its compacted files again.
type cleanupMark struct {
	Version int   `json:"version"` // 1, or 2 once the log was compacted
	Through int64 `json:"through"` // -1 when nothing was cleaned up
}

var (
	_ contract.Source             = (*Source)(nil)
	_ contract.SourceCheckpointer = (*Source)(nil)
	_ contract.SourceCommitter    = (*Source)(nil)
	_ contract.AvailableNowSource = (*Source)(nil)
	_ contract.SourceIdentifier   = (*Source)(nil)
	_ contract.Describer          = (*Source)(nil)
)

// Source is a landing directory of files. See the package documentation.
type Source struct {
	dir    string
	format Format
	schema *arrow.Schema
	cols   []column
	cfg    config

	mu struct {
		sync.Mutex
		store   storage.Store
		log     *offsetlog.Log[LogEntry]
		clog    *offsetlog.Log[compactEntry]
		entries map[int64]LogEntry // remembered entries: compacted and plain
		latest  int64              // highest logged entry, -1 for none
		taken   map[string]takenFile
		cleaned int64 // entries up to here were cleaned up
		// markVersion is the cleanup object's version, 0 when it does not
		// exist.
		markVersion int
		// compacted is the newest compact entry, -1 for none; an entry up
		// to it that entries lacks was forgotten (WithMaxFileAge).
		compacted int64
		// newest is the newest modification time of a file ever taken,
		// compactNewest the same over entries up to compacted; noneTaken
		// before the first.
		newest, compactNewest int64
		// forgotten is the newest modification time of a file of a
		// forgotten entry (WithMaxFileAge), noneTaken when none was: the
		// listing never takes a file modified at or before it, whatever
		// the age option of this run, since its name may be forgotten.
		forgotten int64
		stale     bool                  // objects compacted made obsolete remain on disk
		snapshot  map[string]FileRecord // AvailableNow: the eligible files then, as listed; nil otherwise
		dead      storage.Store         // dead-letter directory, opened on first use
	}
}

// New returns a source reading files of format from the landing directory
// dir, parsed into schema. OpenCheckpoint must be called before planning.
func New(dir string, format Format, schema *arrow.Schema, opts ...Option) (*Source, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty landing directory", ErrBadOption)
	}
	if format < JSON || format > Parquet {
		return nil, fmt.Errorf("%w: unknown format %v", ErrBadOption, format)
	}
	if schema == nil || schema.NumFields() == 0 {
		return nil, fmt.Errorf("%w: a schema with at least one column is required", ErrBadOption)
	}
	cols, err := columnsOf(schema)
	if err != nil {
		return nil, err
	}
	cfg := defaults(format)
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("files: resolve %s: %w", dir, err)
	}
	if cfg.cleanup.archive != "" {
		if cfg.cleanup.archive, err = filepath.Abs(cfg.cleanup.archive); err != nil {
			return nil, fmt.Errorf("files: resolve archive %s: %w", cfg.cleanup.archive, err)
		}
		if cfg.cleanup.archive == abs {
			return nil, fmt.Errorf("%w: archive directory is the landing directory", ErrBadOption)
		}
	}
	s := &Source{dir: abs, format: format, schema: schema, cols: cols, cfg: cfg}
	s.mu.latest = -1
	s.mu.cleaned = -1
	s.mu.compacted = -1
	s.mu.newest, s.mu.compactNewest, s.mu.forgotten = noneTaken, noneTaken, noneTaken
	return s, nil
}

// Schema implements the source contract.
func (s *Source) Schema() *arrow.Schema { return s.schema }

// Description implements the engine's Describer: files[/landing/*.json].
func (s *Source) Description() string {
	return "files[" + filepath.Join(s.dir, s.cfg.glob) + "]"
}

// offsets is the codec of {"logOffset":k}.
func offsets() offset.Codec {
	return offset.Codec{Field: "logOffset", Min: -1, Var: "k", Err: ErrBadOffset}
}

// EncodeOffset returns the offset JSON of files log entry k.
func EncodeOffset(k int64) json.RawMessage { return offsets().Encode(k) }

// DecodeOffset parses an offset written by EncodeOffset.
func DecodeOffset(off json.RawMessage) (int64, error) { return offsets().Decode(off) }

// InitialOffset implements the source contract: {"logOffset":-1}.
func (s *Source) InitialOffset(context.Context) (json.RawMessage, error) {
	return EncodeOffset(-1), nil
}

// OpenCheckpoint implements the engine's SourceCheckpointer: it loads the
// files log under store (the source's own folder of the checkpoint), that
// is the newest compact entry and the plain entries after it, and
// rebuilds the set of taken file names from them. It writes nothing.
func (s *Source) OpenCheckpoint(ctx context.Context, store storage.Store) error {
	log := offsetlog.New[LogEntry](store, logDir)
	clog := offsetlog.New[compactEntry](store, compactDir)
	l, err := loadLog(ctx, store, log, clog)
	if err != nil {
		return fmt.Errorf("files: open checkpoint: %w", err)
	}
	cleaned, markVersion := int64(-1), 0
	data, err := store.Get(ctx, cleanupName)
	switch {
	case err == nil:
		var m cleanupMark
		if err := json.Unmarshal(data, &m); err != nil || (m.Version != 1 && m.Version != 2) || m.Through < -1 {
			return fmt.Errorf("files: open checkpoint: %s/%s is not a version 1 or 2 cleanup record: %q", store.URL(), cleanupName, offset.Trunc(data))
		}
		cleaned, markVersion = m.Through, m.Version
	case !storage.IsNotExist(err):
		return fmt.Errorf("files: open checkpoint: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.store, s.mu.log, s.mu.clog = store, log, clog
	s.mu.entries, s.mu.taken, s.mu.latest, s.mu.cleaned = l.entries, takenFiles(l.entries), l.latest, cleaned
	s.mu.compacted, s.mu.newest, s.mu.compactNewest, s.mu.stale = l.compacted, l.newest, l.compactNewest, l.stale
	s.mu.forgotten = l.forgotten
	s.mu.markVersion = markVersion
	s.mu.snapshot = nil // a run that wants one calls PrepareAvailableNow after this
	return nil
}

// LatestOffset implements the source contract. If the files log already
// holds the entry after start (a crash came between this log and the
// engine's), it returns that entry; otherwise it logs a new entry of the
// files not taken yet (hashing each) and, with WithDeadLetter, of the
// taken files found changed, or returns start when there are none. A taken
// file found changed without a dead-letter directory fails it with a
// *ChangedError.
func (s *Source) LatestOffset(ctx context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, err := DecodeOffset(start)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.log == nil {
		return nil, ErrNotOpen
	}
	if k > s.mu.latest {
		return nil, fmt.Errorf("%w: start logOffset %d is beyond the files log (latest %d) in %s", ErrBadOffset, k, s.mu.latest, s.mu.store.URL())
	}
	if k < s.mu.latest {
		// A replay (a fork) from before the newest compact entry: the
		// entry must still be remembered, or the engine would record a
		// batch no Read can run.
		if _, ok := s.mu.entries[k+1]; !ok {
			return nil, s.missingEntry(k + 1)
		}
		return EncodeOffset(k + 1), nil
	}
	e, err := s.listNew()
	if err != nil {
		return nil, err
	}
	if len(e.Files) == 0 && len(e.Changed) == 0 {
		return start, nil
	}
	next := s.mu.latest + 1
	if err := s.mu.log.Add(ctx, next, e); err != nil {
		return nil, fmt.Errorf("files: log batch %d: %w", next, err)
	}
	fault.Point(fault.FilesAfterLog)
	s.mu.entries[next] = e
	for _, f := range e.Files {
		s.mu.taken[f.Name] = takenFile{FileRecord: f, entry: next}
		s.mu.newest = max(s.mu.newest, f.ModTime)
	}
	for _, c := range e.Changed {
		s.mu.taken[c.Name] = takenFile{FileRecord: c.FileRecord, entry: next}
		s.mu.newest = max(s.mu.newest, c.ModTime)
	}
	s.mu.latest = next
	return EncodeOffset(next), nil
}

// PrepareAvailableNow implements the engine's AvailableNowSource: later
// batches take only files that were eligible at this call.
func (s *Source) PrepareAvailableNow(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs, err := s.listEligible()
	if err != nil {
		return err
	}
	snap := make(map[string]FileRecord, len(fs))
	for _, f := range fs {
		snap[f.Name] = f
	}
	s.mu.snapshot = snap
	return nil
}

// listEligible lists the landing files that match the landing contract, in
// (mod time, name) order. s.mu is held.
func (s *Source) listEligible() ([]FileRecord, error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("files: list %s: %w", s.dir, err)
	}
	var cutoff int64
	if s.cfg.minAge > 0 {
		cutoff = s.cfg.Clock().Add(-s.cfg.minAge).UnixNano()
	}
	tooOld := int64(noneTaken) // WithMaxFileAge: files modified before this are never taken
	if s.cfg.maxAge > 0 && s.mu.newest != noneTaken {
		tooOld = s.mu.newest - int64(s.cfg.maxAge)
	}
	var out []FileRecord
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() || !eligibleName(name, s.cfg.glob) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			if os.IsNotExist(err) {
				continue // moved away since the listing
			}
			return nil, fmt.Errorf("files: stat %s: %w", filepath.Join(s.dir, name), err)
		}
		mt := info.ModTime().UnixNano()
		if (cutoff != 0 && mt > cutoff) || mt < tooOld {
			continue
		}
		if s.mu.forgotten != noneTaken && mt <= s.mu.forgotten {
			continue // perhaps a forgotten name, whatever the age option now
		}
		out = append(out, FileRecord{Name: name, Size: info.Size(), ModTime: mt})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ModTime != out[j].ModTime {
			return out[i].ModTime < out[j].ModTime
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func eligibleName(name, glob string) bool {
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || strings.HasSuffix(name, ".tmp") {
		return false
	}
	ok, _ := filepath.Match(glob, name)
	return ok
}

// listNew returns the next entry: the eligible files no entry took, and,
// with WithDeadLetter, the taken files whose size or modification time
// differ from their newest record; at most WithMaxFilesPerTrigger of them
// together. Without a dead-letter directory a changed taken file fails it
// with a *ChangedError. Every file it returns was hashed. s.mu is held.
func (s *Source) listNew() (LogEntry, error) {
	e := LogEntry{Version: logVersion, Files: []FileRecord{}}
	all, err := s.listEligible()
	if err != nil {
		return e, err
	}
	for _, f := range all {
		if s.cfg.maxFiles > 0 && len(e.Files)+len(e.Changed) == s.cfg.maxFiles {
			break
		}
		if t, ok := s.mu.taken[f.Name]; ok {
			if f.Size == t.Size && f.ModTime == t.ModTime {
				continue
			}
			if s.cfg.deadLetter == "" {
				return e, &ChangedError{File: filepath.Join(s.dir, f.Name), Entry: t.entry,
					TakenSize: t.Size, Size: f.Size, TakenModTime: t.ModTime, ModTime: f.ModTime,
					Reason: "it changed after it was taken, and its new bytes would never be read: the landing contract (write elsewhere, then rename; never change a landed file) was broken. " +
						"To go on: restore it as recorded, move it out of the landing directory (what no batch read is then not read), " +
						"or configure WithDeadLetter to have the bytes no batch read copied there"}
			}
			if snap, ok := s.mu.snapshot[f.Name]; s.mu.snapshot != nil && (!ok || snap.Size != f.Size || snap.ModTime != f.ModTime) {
				continue // AvailableNow: changed since the run began; the next run takes it
			}
			c, ok, err := s.changedFile(f.Name, t)
			if err != nil {
				return e, err
			}
			if ok {
				e.Changed = append(e.Changed, c)
			}
			continue
		}
		if s.mu.snapshot != nil {
			if _, ok := s.mu.snapshot[f.Name]; !ok {
				continue
			}
		}
		rec, _, ok, err := s.digest(f.Name, -1)
		if err != nil {
			return e, err
		}
		if ok {
			e.Files = append(e.Files, rec)
		}
	}
	// The listing's order, by the values recorded (a file may have changed
	// between the listing and its hashing).
	sort.Slice(e.Files, func(i, j int) bool {
		if e.Files[i].ModTime != e.Files[j].ModTime {
			return e.Files[i].ModTime < e.Files[j].ModTime
		}
		return e.Files[i].Name < e.Files[j].Name
	})
	return e, nil
}

// entriesIn returns the logged entries start+1..end, in order.
func (s *Source) entriesIn(start, end json.RawMessage) ([]int64, []LogEntry, error) {
	from, to, err := offsets().Range(start, end)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.log == nil {
		return nil, nil, ErrNotOpen
	}
	var ids []int64
	var lists []LogEntry
	for k := from + 1; k <= to; k++ {
		e, ok := s.mu.entries[k]
		if !ok {
			return nil, nil, s.missingEntry(k)
		}
		ids = append(ids, k)
		lists = append(lists, e)
	}
	return ids, lists, nil
}

// missingEntry is the error for entry k, which the log does not hold.
// s.mu is held.
func (s *Source) missingEntry(k int64) error {
	if k >= 0 && k <= s.mu.compacted {
		return fmt.Errorf("%w: files log entry %d in %s was forgotten by a compaction (WithMaxFileAge): its files are older than the age limit", ErrBadOffset, k, s.mu.store.URL())
	}
	return fmt.Errorf("%w: the files log in %s has no entry %d", ErrBadOffset, s.mu.store.URL(), k)
}

// SourceID identifies what the source reads, for the engine's restart
// check: offsets and the taken-files log under sources/<i>/ belong to this
// directory and glob.
func (s *Source) SourceID() string { return s.Description() }
