package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// intentSource reads committed intents from a position: per partition, the
// next offset to read.
type intentSource interface {
	// name is the topic or table, recorded in the checkpoint.
	name() string
	open(ctx context.Context, next map[string]int64) error
	// poll returns the next intents in delivery order (none after a
	// short wait when there are none).
	poll(ctx context.Context) ([]Intent, error)
	// ends is the end offset per partition, for the lag.
	ends(ctx context.Context) (map[int32]int64, error)
	close()
}

// kafkaSource reads a topic at read_committed, with no group.
type kafkaSource struct {
	cfg *config
	cl  *kgo.Client
	adm *kadm.Client
}

func (k *kafkaSource) name() string { return k.cfg.topic }

func (k *kafkaSource) open(ctx context.Context, next map[string]int64) error {
	probe, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.cfg.brokers...)}, k.cfg.kopts...)...)
	if err != nil {
		return fmt.Errorf("outbox: kafka client: %w", err)
	}
	ends, err := kadm.NewClient(probe).ListCommittedOffsets(ctx, k.cfg.topic)
	probe.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("outbox: list partitions of %s: %w", k.cfg.topic, err)
	}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		parts[o.Partition] = kgo.NewOffset().At(next[strconv.Itoa(int(o.Partition))])
	})
	if len(parts) == 0 {
		return fmt.Errorf("outbox: topic %s has no partitions", k.cfg.topic)
	}
	k.cl, err = kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(k.cfg.brokers...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{k.cfg.topic: parts}),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, k.cfg.kopts...)...)
	if err != nil {
		return fmt.Errorf("outbox: kafka client: %w", err)
	}
	k.adm = kadm.NewClient(k.cl)
	return nil
}

func (k *kafkaSource) poll(ctx context.Context) ([]Intent, error) {
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	fs := k.cl.PollRecords(pctx, 500)
	cancel()
	var ferr error
	fs.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
			ferr = fmt.Errorf("outbox: fetch %s[%d]: %w", t, p, err)
		}
	})
	if ferr != nil {
		return nil, ferr
	}
	recs := fs.Records()
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	out := make([]Intent, len(recs))
	for i, r := range recs {
		out[i] = Intent{ID: intentID(r.Value, k.cfg.idField, r.Topic, r.Partition, r.Offset), Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Payload: r.Value}
	}
	return out, nil
}

func (k *kafkaSource) ends(ctx context.Context) (map[int32]int64, error) {
	l, err := k.adm.ListCommittedOffsets(ctx, k.cfg.topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[o.Partition] = o.Offset
		}
	})
	return out, nil
}

func (k *kafkaSource) close() {
	if k.cl != nil {
		k.cl.Close()
		k.cl = nil
	}
}

// pgSource reads an outbox table in order of its seq column (partition 0,
// offset seq). Only committed rows are visible, and the table is written
// under one job's offsets-in-sink guard, whose progress-row lock orders the
// writing transactions, so seq grows in commit order.
type pgSource struct {
	pool    *pgxpool.Pool
	table   string
	idField string
	next    int64
}

func (p *pgSource) name() string { return "table:" + p.table }

func (p *pgSource) open(ctx context.Context, next map[string]int64) error {
	p.next = next["0"]
	var n int64
	err := p.pool.QueryRow(ctx, "SELECT count(*) FROM (SELECT seq FROM "+pgx.Identifier{p.table}.Sanitize()+" LIMIT 1) t").Scan(&n)
	if err != nil {
		return fmt.Errorf("outbox: outbox table %s (it needs a bigint seq column, e.g. seq bigserial primary key): %w", p.table, err)
	}
	return nil
}

func (p *pgSource) poll(ctx context.Context) ([]Intent, error) {
	rows, err := p.pool.Query(ctx, "SELECT t.seq, row_to_json(t)::text FROM "+pgx.Identifier{p.table}.Sanitize()+" t WHERE t.seq >= $1 ORDER BY t.seq LIMIT 500", p.next)
	if err != nil {
		return nil, fmt.Errorf("outbox: read outbox table %s: %w", p.table, err)
	}
	var out []Intent
	for rows.Next() {
		var seq int64
		var js string
		if err := rows.Scan(&seq, &js); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox: read outbox table %s: %w", p.table, err)
		}
		out = append(out, Intent{ID: intentID([]byte(js), p.idField, p.table, 0, seq), Topic: p.table, Offset: seq, Payload: []byte(js)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: read outbox table %s: %w", p.table, err)
	}
	if len(out) > 0 {
		p.next = out[len(out)-1].Offset + 1
		return out, nil
	}
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, nil
}

func (p *pgSource) ends(ctx context.Context) (map[int32]int64, error) {
	var end int64
	if err := p.pool.QueryRow(ctx, "SELECT coalesce(max(seq), 0) + 1 FROM "+pgx.Identifier{p.table}.Sanitize()).Scan(&end); err != nil {
		return nil, err
	}
	return map[int32]int64{0: end}, nil
}

func (p *pgSource) close() {}
