package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// prefetched is what Prefetch fetched for one planned range: the leaders
// and, per partition, the answer to the range's first fetch.
type prefetched struct {
	start, end json.RawMessage
	meta       *leaders
	first      map[topicPartition]prefetchedFetch
}

type prefetchedFetch struct {
	off int64
	rp  *kmsg.FetchResponseTopicPartition
}

// Prefetch makes the Read of [start, end) that follows cheaper: it loads
// the partitions' leaders and sends every partition's first fetch at once,
// and keeps the answers for that Read, which then uses them instead of a
// metadata request and one fetch after another. It changes nothing that
// Read returns: a fetch below the planned end is answered with the same
// records whenever it is sent (except records that retention deletes
// between the prefetch and the Read: with WithFailOnDataLoss(false) they
// are still returned, as they would be between a batch's first read and
// its re-run), and Read fetches whatever the prefetch did not bring (a failed fetch, an error code, a range larger than one
// answer). The engine calls it between planning a batch and reading it
// (while it writes the batch's write-ahead entry, or the previous batch's
// commit), never at the same time as Read. Only small ranges are
// prefetched (at most WithRowsPerRecord offsets in all), so the answers
// held stay small. A Prefetch for other offsets replaces the one held.
func (s *Source) Prefetch(ctx context.Context, start, end json.RawMessage) {
	s.pre.Lock()
	s.pre.p = nil
	s.pre.Unlock()
	st, err := ParsePosition(start)
	if err != nil {
		return
	}
	en, err := ParsePosition(end)
	if err != nil {
		return
	}
	type want struct {
		tp       topicPartition
		from     int64
		response *kmsg.FetchResponseTopicPartition
	}
	var wants []*want
	total := int64(0)
	for _, tp := range en.Offsets.list() {
		from, to := en.first(st, tp), en.Offsets[tp.topic][tp.partition]
		if to > from {
			total += to - from
			wants = append(wants, &want{tp: tp, from: from})
		}
	}
	if len(wants) == 0 || total > int64(s.c.rowsPerRecord) {
		return
	}
	meta, err := s.loadLeaders(ctx, en.Offsets.topics())
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	for _, w := range wants {
		leader, id, ok := meta.lookup(w.tp)
		if !ok {
			continue
		}
		wg.Go(func() {
			rp, err := s.fetch(ctx, leader, id, w.tp, w.from, s.c.readCommitted)
			if err == nil && kerr.ErrorForCode(rp.ErrorCode) == nil {
				w.response = rp
			}
		})
	}
	wg.Wait()
	p := &prefetched{start: start, end: end, meta: meta, first: map[topicPartition]prefetchedFetch{}}
	for _, w := range wants {
		if w.response != nil {
			p.first[w.tp] = prefetchedFetch{off: w.from, rp: w.response}
		}
	}
	s.pre.Lock()
	s.pre.p = p
	s.pre.Unlock()
}

// takePrefetched returns (and forgets) what Prefetch fetched for exactly
// [start, end), or nil.
func (s *Source) takePrefetched(start, end json.RawMessage) *prefetched {
	s.pre.Lock()
	defer s.pre.Unlock()
	p := s.pre.p
	s.pre.p = nil
	if p == nil || !bytes.Equal(p.start, start) || !bytes.Equal(p.end, end) {
		return nil
	}
	return p
}

// firstOf returns the prefetched answer to the fetch of tp at off.
func (p *prefetched) firstOf(tp topicPartition, off int64) (*kmsg.FetchResponseTopicPartition, bool) {
	if p == nil {
		return nil, false
	}
	f, ok := p.first[tp]
	if !ok || f.off != off {
		return nil, false
	}
	return f.rp, true
}
