package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/storage"
)

// positions is what the checkpoint says every SinkPosition sink must hold
// at start.
type positions struct {
	checkpoint string // redacted location, for messages
	committed  int64  // newest commit, -1 for none
	planned    bool   // offsets/committed+1 exists (a batch to recover)
	// base is the first batch this checkpoint's own sinks receive: 0, or
	// for a fork the batch it replays from (the batches before it went to
	// the original query's sinks).
	base int64
}

// check refuses a sink whose newest applied batch does not belong with the
// checkpoint. The accepted positions are the newest commit; the batch
// after it when that batch is planned (the sink applied it, then the
// driver died before commits/N); and nothing at all while the checkpoint
// has committed none of its own batches (a new checkpoint, or a fork that
// has not finished its first batch). Anything else loses or skips
// payments:
//
//   - ahead (a newer batch than the checkpoint planned): the checkpoint is
//     older than the output, and its next batches would be skipped as
//     already applied;
//   - behind (an older batch than the newest commit, or nothing): the
//     output lost batches the checkpoint counts as delivered (restored
//     from a backup, a failover to a replica that lagged, an unclean
//     leader election), and the engine, going on after the newest commit,
//     would never deliver them again.
//
// role is "sink" or "late-rows sink".
func (p positions) check(ctx context.Context, role string, s Sink) error {
	if guarantee(s) == AtLeastOnce {
		return nil // an at-least-once sink does not recognise batches by id
	}
	newest := p.committed // the newest planned batch
	if p.planned {
		newest++
	}
	sp, ok := s.(SinkPosition)
	var id int64
	var has bool
	var err error
	if ok {
		id, has, err = sp.LastBatchID(ctx)
	}
	if !ok || errors.Is(err, errors.ErrUnsupported) {
		// No exact position (an upsert sink): a high-water mark can
		// still show the sink ahead of the checkpoint.
		hw, ok := s.(SinkHighWater)
		if !ok {
			return nil
		}
		id, has, err = hw.HighestBatchID(ctx)
		if err != nil {
			return fmt.Errorf("engine: %s %s: read the highest batch id it holds: %w", role, describe(s), err)
		}
		if has && id > newest {
			return fmt.Errorf("%w: %s %s holds rows of batch %d, but the checkpoint %s has planned only up to %d; the checkpoint is older than the output (restored from a copy?) and the rows of its next batches would be ignored as older. Use the checkpoint that wrote the output, or a new output",
				ErrIncompatibleRestart, role, describe(s), id, p.checkpoint, newest)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("engine: %s %s: read its last applied batch: %w", role, describe(s), err)
	}
	switch {
	case !has && p.committed < p.base:
		return nil
	case has && id == p.committed:
		return nil
	case has && id == p.committed+1 && p.planned:
		return nil
	case has && id > newest:
		return fmt.Errorf("%w: %s %s has applied batch %d, but the checkpoint %s has planned only up to %d; the checkpoint is older than the output (restored from a copy?) and its next batches would be skipped as already applied. Use the checkpoint that wrote the output, or a new output",
			ErrIncompatibleRestart, role, describe(s), id, p.checkpoint, newest)
	case !has:
		return fmt.Errorf("%w: %s %s has applied no batch, but the checkpoint %s has committed batches up to %d: the output lost them (emptied, restored from an empty backup, or new), and going on from batch %d would never deliver them. "+
			"The way out: run the query on a new checkpoint (it starts again from batch 0) with this output emptied or a new one; or, to give this output only the batches from %d on, fork the checkpoint (onceflow checkpoint fork %s NEW --from-batch %d) and run the fork into it",
			ErrIncompatibleRestart, role, describe(s), p.checkpoint, p.committed, p.committed+1, p.committed+1, p.checkpoint, p.committed+1)
	default:
		return fmt.Errorf("%w: %s %s has applied batches up to %d, but the checkpoint %s has committed batches up to %d: the output lost batches %d to %d (restored from a backup, a failover to a replica that lagged, an unclean leader election?), and going on from batch %d would never deliver them. "+
			"The way out: fork the checkpoint from the output's next batch (onceflow checkpoint fork %s NEW --from-batch %d) and run the fork into a new output, which gets batches %d onwards (this output keeps those up to %d); or run the query on a new checkpoint with a new output",
			ErrIncompatibleRestart, role, describe(s), id, p.checkpoint, p.committed, id+1, p.committed, p.committed+1, p.checkpoint, id+1, id+1, id)
	}
}

// sinkPositions reads what check compares with: the fork's first batch,
// if the checkpoint is a fork.
func (r *run) sinkPositions(ctx context.Context, planned bool) (positions, error) {
	p := positions{checkpoint: storage.Redact(r.cfg.checkpoint.URL()), committed: r.committed, planned: planned}
	ff, isFork, err := ReadForkedFrom(ctx, r.cfg.checkpoint)
	if err != nil {
		return p, err
	}
	if isFork {
		p.base = ff.Batch
	}
	return p, nil
}
