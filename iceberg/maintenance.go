package iceberg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
)

// CompactResult tells what Compact did.
type CompactResult struct {
	Groups       int
	FilesRemoved int
	FilesAdded   int
	BytesBefore  int64
	BytesAfter   int64
}

// Compact rewrites the table's small data files (below 75% of
// targetBytes, at least minFiles of them in one partition) into files of
// about targetBytes, as one "replace" snapshot. It is safe next to a
// running writer: the commit requires the branch head it planned on, so a
// batch committed meanwhile makes it fail with a table.ErrCommitFailed
// (run it again) and never the writer's commit, which reloads and retries
// on its own. The replaced files stay referenced by the older snapshots
// until those are expired. A replace snapshot carries no new rows, so
// streaming readers (Source) pass over it.
func Compact(ctx context.Context, cat *Catalog, name string, targetBytes int64, minFiles uint) (CompactResult, error) {
	var res CompactResult
	if targetBytes <= 0 {
		return res, fmt.Errorf("iceberg: compact %s: target file size %d must be positive", name, targetBytes)
	}
	tbl, err := cat.LoadTable(ctx, name)
	if err != nil {
		return res, err
	}
	if tbl.CurrentSnapshot() == nil {
		return res, nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return res, cat.scrub(fmt.Errorf("iceberg: compact %s: plan: %w", name, err))
	}
	cfg := compaction.DefaultConfig()
	cfg.TargetFileSizeBytes = targetBytes
	cfg.MinFileSizeBytes = targetBytes * 3 / 4
	cfg.MaxFileSizeBytes = targetBytes * 9 / 5
	if minFiles > 0 {
		cfg.MinInputFiles = minFiles
	}
	plan, err := cfg.PlanCompaction(tasks)
	if err != nil {
		return res, fmt.Errorf("iceberg: compact %s: %w", name, err)
	}
	if len(plan.Groups) == 0 {
		return res, nil
	}
	groups := make([]table.CompactionTaskGroup, 0, len(plan.Groups))
	for _, g := range plan.Groups {
		groups = append(groups, table.CompactionTaskGroup{PartitionKey: g.PartitionKey, Tasks: g.Tasks, TotalSizeBytes: g.TotalSizeBytes})
	}
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return res, err
	}
	rr, err := tx.RewriteDataFiles(ctx, groups, table.RewriteDataFilesOptions{
		SnapshotProps: map[string]string{"onceflow.maintenance": "compact"},
	})
	if err != nil {
		return res, cat.scrub(fmt.Errorf("iceberg: compact %s: rewrite: %w", name, err))
	}
	if _, err := tx.Commit(ctx); err != nil {
		return res, cat.scrub(fmt.Errorf("iceberg: compact %s: commit (a writer committed meanwhile? run it again): %w", name, err))
	}
	return CompactResult{Groups: rr.RewrittenGroups, FilesRemoved: rr.RemovedDataFiles, FilesAdded: rr.AddedDataFiles,
		BytesBefore: rr.BytesBefore, BytesAfter: rr.BytesAfter}, nil
}

// ExpireOptions says what Expire keeps.
type ExpireOptions struct {
	// OlderThan: only snapshots older than this expire. Default 0: any age.
	OlderThan time.Duration
	// RetainLast snapshots of the main branch always stay. Default (0): 1.
	RetainLast int
	// OrphansOlderThan: files under the table location that no snapshot
	// references are deleted once older than this. Default (0): 1 hour.
	// A negative value skips the orphan cleanup.
	OrphansOlderThan time.Duration
	// DryRun lists what would go without deleting anything.
	DryRun bool
}

// ExpireResult tells what Expire did.
type ExpireResult struct {
	SnapshotsBefore, SnapshotsAfter int
	OrphansDeleted                  []string
	OrphansKept                     []string // orphans protected as the batch in flight
}

// Expire expires old snapshots (their no-longer-referenced manifests and
// data files are deleted with them) and then deletes orphan files. It
// never deletes a file a retained snapshot references, and it keeps the
// files of the batch in flight: for every query that wrote to the table
// (table property onceflow.last-batch.<query> = N), files whose names
// carry the write id of batch N+1, N+2 or N+3 stay, whatever their age, as
// does any file younger than OrphansOlderThan (a commit's manifests in the
// making).
func Expire(ctx context.Context, cat *Catalog, name string, opts ExpireOptions) (ExpireResult, error) {
	var res ExpireResult
	if opts.RetainLast <= 0 {
		opts.RetainLast = 1
	}
	if opts.OrphansOlderThan == 0 {
		opts.OrphansOlderThan = time.Hour
	}
	if opts.OlderThan < 0 {
		return res, fmt.Errorf("iceberg: expire %s: OlderThan %s is negative", name, opts.OlderThan)
	}
	tbl, err := cat.LoadTable(ctx, name)
	if err != nil {
		return res, err
	}
	res.SnapshotsBefore = len(tbl.Metadata().Snapshots())
	res.SnapshotsAfter = res.SnapshotsBefore
	if !opts.DryRun && res.SnapshotsBefore > opts.RetainLast {
		tx := tbl.NewTransaction()
		if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
			return res, err
		}
		if err := tx.ExpireSnapshots(table.WithRetainLast(opts.RetainLast), table.WithOlderThan(opts.OlderThan)); err != nil {
			return res, cat.scrub(fmt.Errorf("iceberg: expire %s: %w", name, err))
		}
		nt, err := tx.Commit(ctx)
		if err != nil {
			return res, cat.scrub(fmt.Errorf("iceberg: expire %s: commit (a writer committed meanwhile? run it again): %w", name, err))
		}
		tbl = nt
		res.SnapshotsAfter = len(tbl.Metadata().Snapshots())
	}
	if opts.OrphansOlderThan < 0 {
		return res, nil
	}
	protected := inFlightWriteIDs(tbl.Metadata())
	fs, err := tbl.FS(ctx)
	if err != nil {
		return res, cat.scrub(fmt.Errorf("iceberg: expire %s: %w", name, err))
	}
	plan, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(opts.OrphansOlderThan))
	if err != nil {
		return res, cat.scrub(fmt.Errorf("iceberg: expire %s: find orphan files: %w", name, err))
	}
	var errs []error
	for _, f := range plan.Files() {
		if isProtected(f, protected) {
			res.OrphansKept = append(res.OrphansKept, f)
			continue
		}
		if !opts.DryRun {
			if err := fs.Remove(f); err != nil {
				errs = append(errs, cat.scrub(fmt.Errorf("remove %s: %w", f, err)))
				continue
			}
		}
		res.OrphansDeleted = append(res.OrphansDeleted, f)
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("iceberg: expire %s: orphan cleanup: %w", name, errors.Join(errs...))
	}
	return res, nil
}

// inFlightWriteIDs are the write ids of the next three batches of every
// query that committed to the table.
func inFlightWriteIDs(meta table.Metadata) []string {
	var ids []string
	for k, v := range meta.Properties() {
		q, ok := strings.CutPrefix(k, propLastBatchPrefix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		for d := int64(1); d <= 3; d++ {
			ids = append(ids, WriteID(q, n+d).String())
		}
	}
	return ids
}

func isProtected(path string, ids []string) bool {
	for _, id := range ids {
		if strings.Contains(path, id) {
			return true
		}
	}
	return false
}
