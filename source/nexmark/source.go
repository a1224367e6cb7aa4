package nexmark

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/source/internal/offset"
	"github.com/onceflow/onceflow/source/internal/pace"
)

// Column names. Bid columns keep Nexmark's names; person and auction
// columns whose Nexmark name collides (id, name…) are prefixed.
const (
	ColEventType = "event_type"
	ColDateTime  = "date_time"
	ColExtra     = "extra"

	ColPersonID     = "person_id"
	ColName         = "name"
	ColEmailAddress = "email_address"
	ColCreditCard   = "credit_card"
	ColCity         = "city"
	ColState        = "state"

	ColAuctionID   = "auction_id"
	ColItemName    = "item_name"
	ColDescription = "description"
	ColInitialBid  = "initial_bid"
	ColReserve     = "reserve"
	ColExpires     = "expires"
	ColSeller      = "seller"
	ColCategory    = "category"

	ColAuction = "auction"
	ColBidder  = "bidder"
	ColPrice   = "price"
	ColChannel = "channel"
	ColURL     = "url"
)

var tsType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// BidSchema is the schema of a bids-only source: Nexmark's bid.
func BidSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: ColAuction, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColBidder, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColPrice, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColChannel, Type: arrow.BinaryTypes.String},
		{Name: ColURL, Type: arrow.BinaryTypes.String},
		{Name: ColDateTime, Type: tsType},
		{Name: ColExtra, Type: arrow.BinaryTypes.String},
	}, nil)
}

// EventSchema is the schema of the full event stream: one flattened row per
// event, event_type (0 person, 1 auction, 2 bid), the shared date_time and
// extra, and the columns of each kind, null on the rows of other kinds.
func EventSchema() *arrow.Schema {
	i64, str := arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String
	return arrow.NewSchema([]arrow.Field{
		{Name: ColEventType, Type: arrow.PrimitiveTypes.Int8},
		{Name: ColDateTime, Type: tsType},
		{Name: ColExtra, Type: str},
		{Name: ColPersonID, Type: i64, Nullable: true},
		{Name: ColName, Type: str, Nullable: true},
		{Name: ColEmailAddress, Type: str, Nullable: true},
		{Name: ColCreditCard, Type: str, Nullable: true},
		{Name: ColCity, Type: str, Nullable: true},
		{Name: ColState, Type: str, Nullable: true},
		{Name: ColAuctionID, Type: i64, Nullable: true},
		{Name: ColItemName, Type: str, Nullable: true},
		{Name: ColDescription, Type: str, Nullable: true},
		{Name: ColInitialBid, Type: i64, Nullable: true},
		{Name: ColReserve, Type: i64, Nullable: true},
		{Name: ColExpires, Type: tsType, Nullable: true},
		{Name: ColSeller, Type: i64, Nullable: true},
		{Name: ColCategory, Type: i64, Nullable: true},
		{Name: ColAuction, Type: i64, Nullable: true},
		{Name: ColBidder, Type: i64, Nullable: true},
		{Name: ColPrice, Type: i64, Nullable: true},
		{Name: ColChannel, Type: str, Nullable: true},
		{Name: ColURL, Type: str, Nullable: true},
	}, nil)
}

var (
	_ contract.Source             = (*Source)(nil)
	_ contract.AvailableNowSource = (*Source)(nil)
	_ contract.Describer          = (*Source)(nil)
)

// Source is the Nexmark event generator as a source. See the package
// documentation.
type Source struct {
	cfg    config
	gen    *Generator
	schema *arrow.Schema

	mu struct {
		sync.Mutex
		pace pace.Pace // unbounded: how far the clock reaches; frozen by PrepareAvailableNow
	}
}

// offsets is the codec of {"events":N}.
func offsets() offset.Codec {
	return offset.Codec{Field: "events", Min: 0, Var: "N", Err: ErrBadOffset}
}

// New returns a Nexmark source configured by opts.
func New(opts ...Option) (*Source, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Source{
		cfg: cfg,
		gen: NewGenerator(cfg.base, time.Second/time.Duration(cfg.eventsPerSecond)),
	}
	s.mu.pace = pace.New(cfg.eventsPerSecond, cfg.Clock)
	if cfg.bidsOnly {
		s.schema = BidSchema()
	} else {
		s.schema = EventSchema()
	}
	return s, nil
}

// Generator returns the source's generator, to compute the events of any
// offset range outside a query (references, Kafka producers).
func (s *Source) Generator() *Generator { return s.gen }

// Schema implements the source contract: BidSchema in bids-only mode,
// EventSchema otherwise.
func (s *Source) Schema() *arrow.Schema { return s.schema }

// Description implements the engine's Describer.
func (s *Source) Description() string {
	kind := "events"
	if s.cfg.bidsOnly {
		kind = "bids"
	}
	if s.cfg.total >= 0 {
		return fmt.Sprintf("nexmark[%s,%d total]", kind, s.cfg.total)
	}
	return fmt.Sprintf("nexmark[%s,%d/s]", kind, s.cfg.eventsPerSecond)
}

// InitialOffset implements the source contract: {"events":0}.
func (s *Source) InitialOffset(context.Context) (json.RawMessage, error) {
	return EncodeOffset(0), nil
}

// EncodeOffset returns the offset JSON of the position n (the number of
// events before it).
func EncodeOffset(n int64) json.RawMessage { return offsets().Encode(n) }

// DecodeOffset parses an offset written by EncodeOffset.
func DecodeOffset(off json.RawMessage) (int64, error) { return offsets().Decode(off) }

// LatestOffset implements the source contract. A bounded source
// (WithTotalEvents) has every event available; an unbounded one makes
// events available at the events-per-second rate from New, appended after
// the start of the first call. Both are capped by the max events per
// trigger.
func (s *Source) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	from, err := DecodeOffset(start)
	if err != nil {
		return nil, err
	}
	var end int64
	if s.cfg.total >= 0 {
		end = s.cfg.total
	} else {
		s.mu.Lock()
		end = s.mu.pace.Reach(from)
		s.mu.Unlock()
	}
	if s.cfg.maxPerTrigger > 0 {
		end = min(end, from+s.cfg.maxPerTrigger)
	}
	if end <= from {
		return start, nil
	}
	return EncodeOffset(end), nil
}

// PrepareAvailableNow implements the engine's AvailableNowSource: an
// unbounded source reaches no further than the events available at this
// call. A bounded source needs nothing: it never passes its total.
func (s *Source) PrepareAvailableNow(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.pace.Freeze()
	return nil
}

// Read implements the source contract: it emits the events numbered
// [start, end) in order (only the bids in bids-only mode), in records
// covering at most the batch size of event numbers. Each record is released
// after emit returns.
func (s *Source) Read(ctx context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	from, to, err := offsets().Range(start, end)
	if err != nil {
		return err
	}
	if s.cfg.total >= 0 && to > s.cfg.total {
		return fmt.Errorf("%w: range end %d beyond the total of %d events", ErrBadOffset, to, s.cfg.total)
	}
	for o := from; o < to; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(s.cfg.BatchSize), to-o)
		var rec arrow.RecordBatch
		if s.cfg.bidsOnly {
			rec = s.BidRecord(o, o+n)
		} else {
			rec = s.EventRecord(o, o+n)
		}
		err := emit(rec)
		rec.Release()
		if err != nil {
			return err
		}
		o += n
	}
	return nil
}

// Bids returns how many of the event numbers [from, to) are bids.
func Bids(from, to int64) int64 { return bidsBefore(to) - bidsBefore(from) }

func bidsBefore(n int64) int64 {
	const nonBids = PersonProportion + AuctionProportion
	return n/TotalProportion*BidProportion + max(n%TotalProportion-nonBids, 0)
}

// BidRecord builds the bids among event numbers [from, to) as one record
// of BidSchema. The caller releases it.
func (s *Source) BidRecord(from, to int64) arrow.RecordBatch {
	mem := s.cfg.Mem
	nb := int(Bids(from, to))
	auction, bidder, price := array.NewInt64Builder(mem), array.NewInt64Builder(mem), array.NewInt64Builder(mem)
	channel, url, extra := array.NewStringBuilder(mem), array.NewStringBuilder(mem), array.NewStringBuilder(mem)
	ts := array.NewTimestampBuilder(mem, tsType)
	defer func() {
		for _, b := range []array.Builder{auction, bidder, price, channel, url, extra, ts} {
			b.Release()
		}
	}()
	for _, b := range []array.Builder{auction, bidder, price, channel, url, extra, ts} {
		b.Reserve(nb)
	}
	url.ReserveData(nb * 90)
	extra.ReserveData(nb * avgBidByteSize * 7 / 10)
	channel.ReserveData(nb * 8)
	var e Event
	for n := from; n < to; n++ {
		if TypeOf(n) != BidEvent {
			continue
		}
		s.gen.Fill(n, &e)
		auction.UnsafeAppend(e.Auction)
		bidder.UnsafeAppend(e.Bidder)
		price.UnsafeAppend(e.Price)
		channel.BinaryBuilder.Append(e.Channel)
		url.BinaryBuilder.Append(e.URL)
		ts.UnsafeAppend(arrow.Timestamp(e.DateTime * 1000))
		extra.BinaryBuilder.Append(e.Extra)
	}
	return newRecord(s.schema, nb, auction, bidder, price, channel, url, ts, extra)
}

func newRecord(schema *arrow.Schema, rows int, bs ...array.Builder) arrow.RecordBatch {
	cols := make([]arrow.Array, len(bs))
	for i, b := range bs {
		cols[i] = b.NewArray()
	}
	rec := array.NewRecordBatch(schema, cols, int64(rows))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// EventRecord builds the events numbered [from, to) as one record of
// EventSchema. The caller releases it.
func (s *Source) EventRecord(from, to int64) arrow.RecordBatch {
	mem := s.cfg.Mem
	n := int(to - from)
	typ := array.NewInt8Builder(mem)
	ts, expires := array.NewTimestampBuilder(mem, tsType), array.NewTimestampBuilder(mem, tsType)
	i64 := func() *array.Int64Builder { return array.NewInt64Builder(mem) }
	str := func() *array.StringBuilder { return array.NewStringBuilder(mem) }
	extra := str()
	personID, name, email, card, city, state := i64(), str(), str(), str(), str(), str()
	auctionID, item, desc, initial, reserve, seller, category := i64(), str(), str(), i64(), i64(), i64(), i64()
	auction, bidder, price, channel, url := i64(), i64(), i64(), str(), str()
	all := []array.Builder{typ, ts, extra, personID, name, email, card, city, state,
		auctionID, item, desc, initial, reserve, expires, seller, category,
		auction, bidder, price, channel, url}
	defer func() {
		for _, b := range all {
			b.Release()
		}
	}()
	for _, b := range all {
		b.Reserve(n)
	}
	personCols := []array.Builder{personID, name, email, card, city, state}
	auctionCols := []array.Builder{auctionID, item, desc, initial, reserve, expires, seller, category}
	bidCols := []array.Builder{auction, bidder, price, channel, url}
	nulls := func(bs []array.Builder) {
		for _, b := range bs {
			b.AppendNull()
		}
	}
	var e Event
	for o := from; o < to; o++ {
		s.gen.Fill(o, &e)
		typ.UnsafeAppend(int8(e.Type))
		ts.UnsafeAppend(arrow.Timestamp(e.DateTime * 1000))
		extra.BinaryBuilder.Append(e.Extra)
		switch e.Type {
		case PersonEvent:
			personID.Append(e.PersonID)
			name.BinaryBuilder.Append(e.Name)
			email.BinaryBuilder.Append(e.EmailAddress)
			card.BinaryBuilder.Append(e.CreditCard)
			city.Append(e.City)
			state.Append(e.State)
			nulls(auctionCols)
			nulls(bidCols)
		case AuctionEvent:
			nulls(personCols)
			auctionID.Append(e.AuctionID)
			item.BinaryBuilder.Append(e.ItemName)
			desc.BinaryBuilder.Append(e.Description)
			initial.Append(e.InitialBid)
			reserve.Append(e.Reserve)
			expires.Append(arrow.Timestamp(e.Expires * 1000))
			seller.Append(e.Seller)
			category.Append(e.Category)
			nulls(bidCols)
		default:
			nulls(personCols)
			nulls(auctionCols)
			auction.Append(e.Auction)
			bidder.Append(e.Bidder)
			price.Append(e.Price)
			channel.BinaryBuilder.Append(e.Channel)
			url.BinaryBuilder.Append(e.URL)
		}
	}
	return newRecord(s.schema, n, all...)
}
