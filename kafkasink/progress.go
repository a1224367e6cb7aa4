package kafkasink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// marker is the value of a batch marker on the progress topic
// (docs/format/kafka.md).
type marker struct {
	Version int    `json:"v"`
	BatchID int64  `json:"batchId"`
	Query   string `json:"query"`
	Sink    string `json:"sink"`
}

// ensureProgressTopic creates the compacted progress topic if missing.
func (s *Sink) ensureProgressTopic(ctx context.Context) error {
	compact := "compact"
	resp, err := s.adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact}, s.c.progressTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create progress topic %q: %w", s.c.progressTopic, err)
	}
	return nil
}

// lastCommitted returns the highest batch id of a committed marker for the
// transactional id, or -1. It is called after InitProducerID, which
// completes (commits or aborts) any transaction of this id still open; it
// then waits until no other producer's open transaction holds the last
// stable offset below the end seen then, and reads the progress topic up
// to that end with read_committed.
func (s *Sink) lastCommitted(ctx context.Context) (int64, error) {
	topic := s.c.progressTopic
	hwm, err := s.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return -1, fmt.Errorf("list end offsets of %q: %w", topic, err)
	}
	if err := hwm.Error(); err != nil {
		return -1, fmt.Errorf("list end offsets of %q: %w", topic, err)
	}
	deadline := time.Now().Add(s.c.timeout + 10*time.Second)
	for {
		lso, err := s.adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = lso.Error()
		}
		if err != nil {
			return -1, fmt.Errorf("list stable offsets of %q: %w", topic, err)
		}
		behind := false
		hwm.Each(func(o kadm.ListedOffset) {
			if l, ok := lso.Lookup(o.Topic, o.Partition); !ok || l.Offset < o.Offset {
				behind = true
			}
		})
		if !behind {
			break
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("progress topic %q: an open transaction holds the last stable offset for longer than the transaction timeout", topic)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return -1, err
		}
	}
	md, err := s.adm.Metadata(ctx, topic)
	if err != nil {
		return -1, fmt.Errorf("metadata of %q: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return -1, fmt.Errorf("metadata of %q: %v", topic, td.Err)
	}
	last := int64(-1)
	var perr error
	hwm.Each(func(o kadm.ListedOffset) {
		if perr != nil || o.Offset <= 0 {
			return
		}
		pd, ok := td.Partitions[o.Partition]
		if !ok {
			perr = fmt.Errorf("progress topic %q: partition %d has no leader", topic, o.Partition)
			return
		}
		perr = s.scanPartition(ctx, pd.Leader, td.ID, o.Partition, o.Offset, func(r *kgo.Record) error {
			if string(r.Key) != s.txnID {
				return nil
			}
			var m marker
			if err := json.Unmarshal(r.Value, &m); err != nil {
				return fmt.Errorf("progress topic %q partition %d offset %d: marker %q: %w", topic, r.Partition, r.Offset, r.Value, err)
			}
			if m.Query != s.queryID {
				return fmt.Errorf("progress topic %q partition %d offset %d: transactional id %q already holds a marker of query %q, not %q: two queries must never share a transactional id",
					topic, r.Partition, r.Offset, s.txnID, m.Query, s.queryID)
			}
			last = max(last, m.BatchID)
			return nil
		})
	})
	return last, perr
}

// scanPartition reads [0, end) of a progress partition with read_committed
// fetches, ending by offset (markers and aborted records are skipped by
// the fetch position, never delivered).
func (s *Sink) scanPartition(ctx context.Context, leader int32, id [16]byte, partition int32, end int64, fn func(*kgo.Record) error) error {
	off := int64(0)
	idle := 0
	for off < end {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 100
		req.MinBytes = 1
		req.MaxBytes = 8 << 20
		req.IsolationLevel = 1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = s.c.progressTopic
		rt.TopicID = id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = partition
		rp.FetchOffset = off
		rp.PartitionMaxBytes = 8 << 20
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := s.admCl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return fmt.Errorf("fetch %s/%d at %d: %w", s.c.progressTopic, partition, off, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("fetch %s/%d at %d: %w", s.c.progressTopic, partition, off, err)
		}
		var part *kmsg.FetchResponseTopicPartition
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].Partition == partition {
					part = &resp.Topics[i].Partitions[j]
				}
			}
		}
		if part == nil {
			return fmt.Errorf("fetch %s/%d at %d: partition missing from the response", s.c.progressTopic, partition, off)
		}
		switch err := kerr.ErrorForCode(part.ErrorCode); {
		case err == nil:
		case errors.Is(err, kerr.OffsetOutOfRange) && part.LogStartOffset > off:
			off = part.LogStartOffset // compaction or retention: markers below are superseded
			continue
		default:
			return fmt.Errorf("fetch %s/%d at %d: %w", s.c.progressTopic, partition, off, err)
		}
		if part.LogStartOffset > off {
			off = part.LogStartOffset
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset: off, IsolationLevel: kgo.ReadCommitted(), Topic: s.c.progressTopic, Partition: partition,
		}, part, s.decomp, nil)
		if fp.Err != nil {
			return fmt.Errorf("fetch %s/%d at %d: %w", s.c.progressTopic, partition, off, fp.Err)
		}
		for _, r := range fp.Records {
			if r.Offset >= end {
				break
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if next > off {
			off, idle = next, 0
			continue
		}
		if idle++; idle > 50 {
			return fmt.Errorf("fetch %s/%d: no progress at offset %d below %s", s.c.progressTopic, partition, off, strconv.FormatInt(end, 10))
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
