package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// ForkStats counts what ForkCheckpoint copied.
type ForkStats struct {
	LogEntries  int // offsets/, commits/ and progress/ entries
	StateFiles  int
	SourceFiles int
	// LeftOut names the source objects not copied because they belong to
	// the original query's identity (see ForkCheckpoint).
	LeftOut []string
}

// deadLetterIDFile is the object in which the Kafka source keeps its
// dead-letter transactional id (source/kafka.DeadLetterIDFile, pinned by
// TestForkGetsItsOwnKafkaDeadLetterID; docs/format/kafka.md).
const deadLetterIDFile = "deadletter.json"

// identityFile reports whether name, a checkpoint object under sources/,
// names the original query's identity outside the checkpoint rather than
// its position, so a fork must not copy it: sources/<i>/deadletter.json.
func identityFile(name string) bool {
	dir, base := path.Split(name)
	parts := strings.Split(strings.TrimSuffix(dir, "/"), "/")
	return base == deadLetterIDFile && len(parts) == 2 && parts[0] == checkpoint.SourcesRoot
}

// ForkCheckpoint makes dst, an empty checkpoint, a copy of src as it was
// when batch fromBatch-1 had just committed, under a new query id, so that
// a query started on dst processes again from batch fromBatch on: the
// same source positions, watermark and state, into whatever sinks that
// query names. It is the supported way to replay; src is only read.
//
// It copies offsets/, commits/ and progress/ entries up to fromBatch-1,
// for every stateful operator partition the snapshot and deltas that
// version fromBatch-1 loads from (checked by loading it), and every
// source's own log under sources/ whole (a files source then takes again
// exactly the files its later batches took, if they still exist), except
// what names the original query outside the checkpoint: the Kafka
// source's dead-letter transactional id, sources/<i>/deadletter.json. The
// fork's source makes an id of its own at its first start; sharing the
// original's would have each query fence the other's dead-letter producer
// and take the other's progress markers for its own. So a fork's source
// produces the dead letters of the batches it replays again, under its
// own id: give the fork a dead-letter topic of its own, as it has sinks of
// its own, or expect those dead letters twice in a shared one. (A
// DeadLetterTransactionalID set in the source's options is the user's:
// give the fork another.) It refuses when batch fromBatch-1 is not
// committed, is older than what src retains, or its state was purged, and
// when dst is not empty. It returns what it copied.
//
// Why not rewind src by hand (delete offsets/N… and commits/N…)? Every
// sink is idempotent in the batch id, and the old run already gave the
// sinks those ids: a files sink finds _onceflow_log/N and skips the
// replay, an offsets-in-sink table holds a batch id at or above N and
// rolls the replay back, a Kafka sink finds batch N's committed marker
// under the query's transactional id and skips it. So the replayed
// batches are silently dropped, or, if the new plan of batch N covers
// other offsets than the old one, the sinks keep the old batch N and
// lose the difference, and state versions after N no longer match the
// log. A fork has a new query id and new sinks, so none of this applies.
//
// The copy is ordered so that an interrupted fork is refused by the
// engine (commits without their write-ahead entries) until its last file,
// offsets/<fromBatch-1>, is written; delete dst and fork again.
func ForkCheckpoint(ctx context.Context, src, dst storage.Store, fromBatch int64) (ForkStats, error) {
	return forkCheckpoint(ctx, src, dst, fromBatch, time.Now())
}

func forkCheckpoint(ctx context.Context, src, dst storage.Store, fromBatch int64, now time.Time) (ForkStats, error) {
	var stats ForkStats
	srcURL := storage.Redact(src.URL())
	if fromBatch < 1 {
		return stats, fmt.Errorf("%w: fork from batch %d: the first batch to replay must be 1 or more (to replay from batch 0, run the query on an empty checkpoint)", ErrInvalidQuery, fromBatch)
	}
	last := fromBatch - 1
	meta, err := ReadMetadata(ctx, src)
	if err != nil {
		return stats, err
	}
	existing, err := dst.List(ctx, "")
	if err != nil {
		return stats, fmt.Errorf("engine: fork: list %s: %w", storage.Redact(dst.URL()), err)
	}
	if len(existing) > 0 {
		return stats, fmt.Errorf("%w: fork: destination %s is not empty (%s, …); fork into a new location", ErrInvalidQuery, storage.Redact(dst.URL()), existing[0].Name)
	}

	// Batch last must be committed and still retained.
	commits, err := listLog(ctx, src, checkpoint.CommitsDir)
	if err != nil {
		return stats, err
	}
	offsets, err := listLog(ctx, src, checkpoint.OffsetsDir)
	if err != nil {
		return stats, err
	}
	if !containsID(commits, last) {
		return stats, fmt.Errorf("%w: fork %s from batch %d: batch %d %s", ErrInvalidQuery, srcURL, fromBatch, last, whyNotCommitted(last, commits, offsets))
	}
	if !containsID(offsets, last) {
		return stats, fmt.Errorf("%w: fork %s from batch %d: offsets/%d is missing although commits/%d exists: %w", ErrInvalidQuery, srcURL, fromBatch, last, last, offsetlog.ErrCorrupt)
	}
	plan, err := checkpoint.NewReader(src).Offsets(ctx, last)
	if err != nil {
		return stats, fmt.Errorf("engine: fork: %w", err)
	}

	// State: find and check the files version last loads from.
	stateFiles, err := forkStateFiles(ctx, src, plan, last)
	if err != nil {
		return stats, fmt.Errorf("%w: fork %s from batch %d: %w", ErrInvalidQuery, srcURL, fromBatch, err)
	}
	sourceFiles, err := src.List(ctx, checkpoint.SourcesRoot+"/")
	if err != nil {
		return stats, fmt.Errorf("engine: fork: list %s/%s: %w", srcURL, checkpoint.SourcesRoot, err)
	}

	// copyAs copies rel of from (src, or a state partition's view of it)
	// to name in dst.
	copyAs := func(from storage.Store, rel, name string) error {
		b, err := from.Get(ctx, rel)
		if err != nil {
			return fmt.Errorf("engine: fork: read %s/%s: %w", srcURL, name, err)
		}
		if err := dst.PutIfAbsent(ctx, name, b); err != nil {
			return fmt.Errorf("engine: fork: write %s/%s: %w", storage.Redact(dst.URL()), name, err)
		}
		return nil
	}
	cp := func(name string) error { return copyAs(src, name, name) }
	// Order: sources, state, progress, commits, offsets but the last,
	// metadata, offsets/last. Until offsets/last exists the engine
	// refuses dst (commits beyond the write-ahead log).
	for _, f := range sourceFiles {
		if identityFile(f.Name) {
			stats.LeftOut = append(stats.LeftOut, f.Name)
			continue
		}
		if err := cp(f.Name); err != nil {
			return stats, err
		}
		stats.SourceFiles++
	}
	for _, f := range stateFiles {
		if err := copyAs(f.folder, f.rel, f.name); err != nil {
			return stats, err
		}
		stats.StateFiles++
	}
	progress, err := listLog(ctx, src, checkpoint.ProgressDir)
	if err != nil {
		return stats, err
	}
	for _, l := range []struct {
		dir string
		ids []int64
	}{{checkpoint.ProgressDir, progress}, {checkpoint.CommitsDir, commits}, {checkpoint.OffsetsDir, offsets}} {
		for _, id := range l.ids {
			if id > last || (l.dir == checkpoint.OffsetsDir && id == last) {
				continue
			}
			if err := cp(offsetlog.FileName(l.dir, id)); err != nil {
				return stats, err
			}
			stats.LogEntries++
		}
	}
	fm := checkpoint.ForkMetadata{
		Metadata: Metadata{
			Version: FormatVersion,
			ID:      newRunID(),
			Name:    fmt.Sprintf("%s (fork of %s at batch %d)", meta.Name, srcURL, fromBatch),
			Created: now.UTC().Format(time.RFC3339Nano),
		},
		ForkedFrom: ForkedFrom{Location: srcURL, QueryID: meta.ID, Name: meta.Name, Batch: fromBatch},
	}
	b, err := checkpoint.EncodeMetadata(fm)
	if err != nil {
		return stats, err
	}
	if err := dst.PutIfAbsent(ctx, checkpoint.MetadataFile, b); err != nil {
		return stats, fmt.Errorf("engine: fork: write %s/%s: %w", storage.Redact(dst.URL()), checkpoint.MetadataFile, err)
	}
	if err := cp(checkpoint.OffsetsFile(last)); err != nil {
		return stats, err
	}
	stats.LogEntries++
	return stats, nil
}

// ReadForkedFrom returns where a forked checkpoint came from, or ok=false
// for a checkpoint that is not a fork (checkpoint.ReadForkedFrom).
func ReadForkedFrom(ctx context.Context, store storage.Store) (ForkedFrom, bool, error) {
	return checkpoint.ReadForkedFrom(ctx, store)
}

func listLog(ctx context.Context, st storage.Store, dir string) ([]int64, error) {
	ids, err := offsetlog.New[json.RawMessage](st, dir).List(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine: fork: list %s/%s: %w", storage.Redact(st.URL()), dir, err)
	}
	return ids, nil
}

func containsID(ids []int64, id int64) bool {
	i := sort.Search(len(ids), func(i int) bool { return ids[i] >= id })
	return i < len(ids) && ids[i] == id
}

func whyNotCommitted(id int64, commits, offsets []int64) string {
	switch {
	case len(commits) == 0:
		return "is not committed: the checkpoint has no committed batch"
	case id < commits[0]:
		return fmt.Sprintf("was purged: the checkpoint keeps batches %d to %d (raise the retention, WithMinBatchesToRetain, to fork further back)", commits[0], commits[len(commits)-1])
	case id > commits[len(commits)-1] && containsID(offsets, id):
		return fmt.Sprintf("is planned but not committed (the newest committed batch is %d); run the query once to finish it, or fork from batch %d", commits[len(commits)-1], commits[len(commits)-1]+1)
	case id > commits[len(commits)-1]:
		return fmt.Sprintf("is not committed yet: the newest committed batch is %d", commits[len(commits)-1])
	}
	return "is not committed (commits/ has a gap there)"
}

// forkFile is a state file a fork copies: name in the new checkpoint,
// read as rel from folder (a partition's view, in which a delta bundled
// with the other partitions' reads as the partition's own: the fork
// writes it as one).
type forkFile struct {
	name   string
	folder storage.Store
	rel    string
}

// forkStateFiles returns the state files version loads from, in the
// folder of every store of every operator partition the plan names
// (state/<operator>/<partition>/, and <store>/ below it for an operator
// with several stores: a join's sides, a processor's states and timers),
// after checking the version loads.
func forkStateFiles(ctx context.Context, src storage.Store, plan OffsetsEntry, version int64) ([]forkFile, error) {
	var out []forkFile
	for _, op := range plan.Conf.Operators {
		stores := []string{""}
		if len(op.Stores) > 0 {
			stores = op.Stores
		}
		for _, store := range stores {
			for p := 0; p < plan.Conf.StatePartitions; p++ {
				dir := checkpoint.StoreDir(op.ID, p, store)
				folder := StateFolder(src, op.ID, p, store)
				infos, err := folder.List(ctx, "")
				if err != nil {
					return nil, fmt.Errorf("list %s/%s: %w", storage.Redact(src.URL()), dir, err)
				}
				var names []string
				for _, in := range infos {
					if !strings.Contains(in.Name, "/") { // a named store's folder below
						names = append(names, in.Name)
					}
				}
				if len(names) == 0 {
					if version < 0 {
						continue
					}
					return nil, fmt.Errorf("state of operator %q partition %d%s: folder %s is missing", op.ID, p, storeLabel(storeSpec{name: store}), dir)
				}
				files, err := stateFolderFiles(ctx, folder, names, version)
				if err != nil {
					return nil, fmt.Errorf("state %s at version %d: %w", dir, version, err)
				}
				for _, f := range files {
					out = append(out, forkFile{name: dir + "/" + f, folder: folder, rel: f})
				}
			}
		}
	}
	return out, nil
}

// stateFolderFiles picks, in one statestore folder, the files version
// loads from: its base (the newest snapshot at or before it, or a full
// delta after that) and the deltas after the base up to it, plus the files that are not versions (the
// schema). It loads version to check they suffice.
func stateFolderFiles(ctx context.Context, folder storage.Store, names []string, version int64) ([]string, error) {
	key, val, err := statestore.ReadSchemas(ctx, folder)
	if err != nil {
		return nil, err
	}
	st, err := statestore.Open(ctx, folder, statestore.Options{KeySchema: key, ValueSchema: val})
	if err != nil {
		return nil, err
	}
	recs, err := st.Load(ctx, version)
	if err != nil {
		if errors.Is(err, statestore.ErrMissing) {
			return nil, fmt.Errorf("cannot be loaded, its files were purged or never written: %w", err)
		}
		return nil, err
	}
	for _, r := range recs {
		r.Release()
	}
	// The load starts from its base: the newest snapshot at or before
	// version, or a full delta after it (state format 2).
	base, err := st.Base(ctx, version)
	if err != nil {
		return nil, err
	}
	snapAtBase := false
	for _, n := range names {
		if v, snap, ok := statestore.ParseFileName(n); ok && snap && v == base {
			snapAtBase = true
		}
	}
	var out []string
	for _, n := range names {
		v, snap, ok := statestore.ParseFileName(n)
		switch {
		case !ok:
			out = append(out, n) // the schema file
		case snap && v == base:
			out = append(out, n)
		case !snap && v > base && v <= version:
			out = append(out, n)
		case !snap && v == base && !snapAtBase:
			out = append(out, n) // a full delta is the base
		}
	}
	return out, nil
}
