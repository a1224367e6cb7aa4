package payments

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"

	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// CheckSinkMatches refuses to run a checkpoint against a sink that is not
// at the checkpoint's batch. Both sinks of the examples recognise a batch
// by its id, so a checkpoint restored from an older copy (or lost and
// replaced, which the sinks' own query-id check also refuses) would replan
// batch ids the sink already holds with other files in them, and the sink
// would skip them: payments silently lost. The sink's newest batch (sinkBatch, -1 for
// none) must be the checkpoint's newest commit, or the one after it when
// that batch is planned (offsets/N: the process died between the sink's
// commit and commits/N, and the restart finishes it).
func CheckSinkMatches(ctx context.Context, cp storage.Store, sinkBatch int64, sink string) error {
	last, err := newest(ctx, cp, "commits")
	if err != nil {
		return err
	}
	if sinkBatch == last {
		return nil
	}
	if sinkBatch == last+1 {
		_, err := cp.Get(ctx, offsetlog.FileName("offsets", sinkBatch))
		if err == nil {
			return nil
		}
		if !errors.Is(err, storage.ErrNotExist) {
			return fmt.Errorf("read offsets/%d: %w", sinkBatch, err)
		}
	}
	return fmt.Errorf("%s holds batch %d but checkpoint %s has committed batch %d: they do not belong together "+
		"(a lost or replaced checkpoint would have the sink skip batches it already holds); "+
		"run with the checkpoint that wrote this sink, or a new sink or job",
		sink, sinkBatch, storage.Redact(cp.URL()), last)
}

// newest returns the largest batch id in the checkpoint folder dir, or -1.
func newest(ctx context.Context, cp storage.Store, dir string) (int64, error) {
	objs, err := cp.List(ctx, dir+"/")
	if err != nil {
		return 0, fmt.Errorf("list %s/: %w", dir, err)
	}
	last := int64(-1)
	for _, o := range objs {
		if n, err := strconv.ParseInt(path.Base(o.Name), 10, 64); err == nil && n > last {
			last = n
		}
	}
	return last, nil
}
