package nexmark

import (
	"context"
	"strconv"
	"time"
)

// AppendJSON appends event e as one flat JSON object whose keys are the
// column names of EventSchema (BidSchema when bidsOnly), without the
// columns of other kinds: {"event_type":2,"date_time":"…","extra":"…",
// "auction":…}. bidsOnly leaves out event_type. Timestamps are RFC 3339 in
// UTC with milliseconds.
func AppendJSON(b []byte, e *Event, bidsOnly bool) []byte {
	b = append(b, '{')
	if !bidsOnly {
		b = append(b, `"event_type":`...)
		b = strconv.AppendInt(b, int64(e.Type), 10)
		b = append(b, ',')
	}
	switch e.Type {
	case PersonEvent:
		b = jsonInt(b, ColPersonID, e.PersonID)
		b = jsonStr(b, ColName, e.Name)
		b = jsonStr(b, ColEmailAddress, e.EmailAddress)
		b = jsonStr(b, ColCreditCard, e.CreditCard)
		b = jsonStr(b, ColCity, []byte(e.City))
		b = jsonStr(b, ColState, []byte(e.State))
	case AuctionEvent:
		b = jsonInt(b, ColAuctionID, e.AuctionID)
		b = jsonStr(b, ColItemName, e.ItemName)
		b = jsonStr(b, ColDescription, e.Description)
		b = jsonInt(b, ColInitialBid, e.InitialBid)
		b = jsonInt(b, ColReserve, e.Reserve)
		b = jsonTime(b, ColExpires, e.Expires)
		b = jsonInt(b, ColSeller, e.Seller)
		b = jsonInt(b, ColCategory, e.Category)
	default:
		b = jsonInt(b, ColAuction, e.Auction)
		b = jsonInt(b, ColBidder, e.Bidder)
		b = jsonInt(b, ColPrice, e.Price)
		b = jsonStr(b, ColChannel, e.Channel)
		b = jsonStr(b, ColURL, e.URL)
	}
	b = jsonTime(b, ColDateTime, e.DateTime)
	b = jsonStr(b, ColExtra, e.Extra)
	b[len(b)-1] = '}'
	return b
}

func jsonKey(b []byte, k string) []byte {
	b = append(b, '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

func jsonInt(b []byte, k string, v int64) []byte {
	b = jsonKey(b, k)
	b = strconv.AppendInt(b, v, 10)
	return append(b, ',')
}

func jsonTime(b []byte, k string, ms int64) []byte {
	b = jsonKey(b, k)
	b = append(b, '"')
	b = time.UnixMilli(ms).UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	return append(b, '"', ',')
}

// jsonStr writes a string value. Generated strings are ASCII; quotes,
// backslashes and control characters are escaped all the same.
func jsonStr(b []byte, k string, v []byte) []byte {
	const hex = "0123456789abcdef"
	b = jsonKey(b, k)
	b = append(b, '"')
	for _, c := range v {
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"', ',')
}

// WriteJSON computes the events numbered [from, to) and hands each to fn as
// JSON (AppendJSON), in order; with bidsOnly only the bids. value is reused
// after fn returns. It is the producer side of a Kafka benchmark: fn can
// produce value to a topic keyed by n.
func (g *Generator) WriteJSON(ctx context.Context, from, to int64, bidsOnly bool, fn func(n int64, value []byte) error) error {
	var e Event
	var buf []byte
	for n := from; n < to; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if bidsOnly && TypeOf(n) != BidEvent {
			continue
		}
		g.Fill(n, &e)
		buf = AppendJSON(buf[:0], &e, bidsOnly)
		if err := fn(n, buf); err != nil {
			return err
		}
	}
	return nil
}
