package processortest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/engine/processortest"
)

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String},
	{Name: "page", Type: arrow.BinaryTypes.String},
}, nil)

// clicks is 6 batches of 40 rows over 8 users and 12 pages.
func clicks(t *testing.T) processortest.Case {
	var recs []arrow.RecordBatch
	for b := range 6 {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := range 40 {
			n := b*40 + i
			rb.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("u%d", n%8))
			rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("p%d", (n*7)%12))
		}
		recs = append(recs, rb.NewRecordBatch())
		rb.Release()
	}
	t.Cleanup(func() {
		for _, r := range recs {
			r.Release()
		}
	})
	return processortest.Case{Schema: schema, Batches: recs, Keys: []string{"user"}}
}

type out struct {
	User string
	Info string
}

// pages counts visits per page in a map state and reports them in the
// map state's order; a processing-time timer reports again a minute later.
type pages struct {
	visits *engine.MapState[string, int64]
	// wallClock and goMap break the determinism rule on purpose.
	wallClock, goMap bool
}

func (p *pages) Init(s *engine.ProcessorSpec) error {
	s.Output(out{})
	p.visits = engine.NewMapState[string, int64](s, "visits")
	return nil
}

func (p *pages) Handle(k *engine.KeyContext, rows *engine.Rows) error {
	var in []struct{ Page string }
	if err := rows.Decode(&in); err != nil {
		return err
	}
	for _, r := range in {
		n, _ := p.visits.Get(k, r.Page)
		p.visits.Put(k, r.Page, n+1)
	}
	user := k.Key().Values()[0].(string)
	switch {
	case p.wallClock:
		k.Emit(out{User: user, Info: time.Now().String()})
	case p.goMap:
		m := map[string]int64{}
		for _, pg := range p.visits.Keys(k) {
			m[pg], _ = p.visits.Get(k, pg)
		}
		s := ""
		for pg, n := range m {
			s += fmt.Sprintf("%s=%d ", pg, n)
		}
		k.Emit(out{User: user, Info: s})
	default:
		s := ""
		for _, pg := range p.visits.Keys(k) {
			n, _ := p.visits.Get(k, pg)
			s += fmt.Sprintf("%s=%d ", pg, n)
		}
		k.Emit(out{User: user, Info: s + fmt.Sprint(k.Rand().IntN(1000))})
	}
	k.RegisterTimer(engine.ProcessingTime, k.BatchTime().Add(time.Minute))
	return nil
}

func (p *pages) OnTimer(k *engine.KeyContext, t engine.Timer) error {
	k.Emit(out{User: k.Key().Values()[0].(string), Info: "timer " + t.At.String()})
	return nil
}

func TestCheckPassesADeterministicProcessor(t *testing.T) {
	processortest.Check(t, clicks(t), func() engine.Processor { return &pages{} })
}

func TestCompareCatchesTheWallClock(t *testing.T) {
	err := processortest.Compare(context.Background(), clicks(t), func() engine.Processor { return &pages{wallClock: true} })
	var d *processortest.DiffError
	if !errors.As(err, &d) {
		t.Fatalf("time.Now in Handle: err %v, want a DiffError", err)
	}
}

func TestCompareCatchesGoMapOrder(t *testing.T) {
	err := processortest.Compare(context.Background(), clicks(t), func() engine.Processor { return &pages{goMap: true} })
	var d *processortest.DiffError
	if !errors.As(err, &d) {
		t.Fatalf("Go map order in the output: err %v, want a DiffError", err)
	}
}
