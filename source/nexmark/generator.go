package nexmark

import (
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Proportions of the event kinds: of every 50 consecutive event numbers,
// the first is a person, the next three are auctions and the other 46 are
// bids (Nexmark's defaults).
const (
	PersonProportion  = 1
	AuctionProportion = 3
	BidProportion     = 46
	TotalProportion   = PersonProportion + AuctionProportion + BidProportion
)

// First ids, as in the reference generators: ids start above zero so that
// queries on small data sets still find matches.
const (
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10
)

// Generator tuning constants of the reference generators (Nexmark's
// NexmarkConfiguration defaults and the model generators' constants).
const (
	numActivePeople     = 1000
	numInFlightAuctions = 100
	hotAuctionRatio     = 2 // P(bid on a hot auction) = 1 - 1/2
	hotBiddersRatio     = 4 // P(bid by a hot bidder) = 1 - 1/4
	hotSellersRatio     = 4 // P(auction by a hot seller) = 1 - 1/4
	hotAuctionGroup     = 100
	hotBidderGroup      = 100
	hotSellerGroup      = 100
	personIDLead        = 10
	auctionIDLead       = 10
	numCategories       = 5
	avgPersonByteSize   = 200
	avgAuctionByteSize  = 500
	avgBidByteSize      = 100
	hotChannelsRatio    = 2
	channelsNumber      = 10_000
	minStringLength     = 3
)

// EventType is the kind of an event.
type EventType int8

// The event kinds, as the event_type column encodes them.
const (
	PersonEvent  EventType = 0
	AuctionEvent EventType = 1
	BidEvent     EventType = 2
)

func (t EventType) String() string {
	switch t {
	case PersonEvent:
		return "person"
	case AuctionEvent:
		return "auction"
	case BidEvent:
		return "bid"
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// TypeOf returns the kind of event number n.
func TypeOf(n int64) EventType {
	switch r := n % TotalProportion; {
	case r < PersonProportion:
		return PersonEvent
	case r < PersonProportion+AuctionProportion:
		return AuctionEvent
	}
	return BidEvent
}

var (
	hotChannels = [...]string{"Google", "Facebook", "Baidu", "Apple"}
	usStates    = [...]string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities    = [...]string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames  = [...]string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames   = [...]string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

// Event is one generated event. Only the fields of its Type are set; the
// byte slices are reused by the next Fill into the same Event, so copy
// what must outlive it.
type Event struct {
	Type     EventType
	Number   int64 // the event number, which is also the seed of its fields
	DateTime int64 // event time, milliseconds since the Unix epoch
	Extra    []byte

	// Person.
	PersonID     int64
	Name         []byte
	EmailAddress []byte
	CreditCard   []byte
	City         string
	State        string

	// Auction.
	AuctionID   int64
	ItemName    []byte
	Description []byte
	InitialBid  int64
	Reserve     int64
	Expires     int64 // milliseconds since the Unix epoch
	Seller      int64
	Category    int64

	// Bid.
	Auction int64
	Bidder  int64
	Price   int64
	Channel []byte // read-only: shared with the generator's tables
	URL     []byte // read-only: shared with the generator's tables
}

// Generator computes events from their numbers. It is immutable after
// NewGenerator and safe for concurrent use; each goroutine fills its own
// Event.
type Generator struct {
	baseMs       int64
	delayNs      int64 // inter-event delay
	hotNames     [len(hotChannels)][]byte
	hotURLs      [len(hotChannels)][]byte
	channelNames [channelsNumber][]byte
	channelURLs  [channelsNumber][]byte
}

// NewGenerator returns a generator whose event n happens at
// base + n*interEventDelay, truncated to milliseconds (Nexmark's event-time
// resolution).
func NewGenerator(base time.Time, interEventDelay time.Duration) *Generator {
	g := &Generator{baseMs: base.UnixMilli(), delayNs: int64(interEventDelay)}
	// The reference generators draw these URLs from unseeded randoms; here
	// they are seeded so every run produces the same URLs.
	for i := range g.hotURLs {
		r := newJavaRandom(-1 - int64(i))
		g.hotNames[i] = []byte(hotChannels[i])
		g.hotURLs[i] = []byte(baseURL(&r))
	}
	for i := range g.channelNames {
		r := newJavaRandom(int64(i))
		g.channelNames[i] = []byte("channel-" + strconv.Itoa(i))
		u := baseURL(&r)
		if r.intn(10) > 0 {
			rev := int32(reverse32(uint32(i)))
			if rev < 0 {
				rev = -rev
			}
			u += "&channel_id=" + strconv.Itoa(int(rev))
		}
		g.channelURLs[i] = []byte(u)
	}
	return g
}

func reverse32(v uint32) uint32 {
	var r uint32
	for range 32 {
		r = r<<1 | v&1
		v >>= 1
	}
	return r
}

func baseURL(r *javaRandom) string {
	b := []byte("https://www.nexmark.com/")
	for range 3 {
		b = appendString(b, r, 5, '_')
		b = append(b, '/')
	}
	return string(append(b, "item.htm?query=1"...))
}

// EventTime returns the event time of event n in milliseconds since the
// Unix epoch.
func (g *Generator) EventTime(n int64) int64 {
	hi, lo := bits.Mul64(uint64(n), uint64(g.delayNs))
	q, _ := bits.Div64(hi, lo, uint64(time.Millisecond))
	return g.baseMs + int64(q)
}

// Fill computes event n into e.
func (g *Generator) Fill(n int64, e *Event) {
	r := newJavaRandom(n)
	e.Type = TypeOf(n)
	e.Number = n
	e.DateTime = g.EventTime(n)
	switch e.Type {
	case PersonEvent:
		g.person(n, &r, e)
	case AuctionEvent:
		g.auction(n, &r, e)
	default:
		g.bid(n, &r, e)
	}
}

// lastBase0PersonID is the newest person id (from 0) at event n: the
// current one when n is a person.
func lastBase0PersonID(n int64) int64 {
	epoch, off := n/TotalProportion, n%TotalProportion
	if off >= PersonProportion {
		off = PersonProportion - 1
	}
	return epoch*PersonProportion + off
}

// lastBase0AuctionID is the newest auction id (from 0) at event n.
func lastBase0AuctionID(n int64) int64 {
	epoch, off := n/TotalProportion, n%TotalProportion
	switch {
	case off < PersonProportion:
		epoch--
		off = AuctionProportion - 1
	case off >= PersonProportion+AuctionProportion:
		off = AuctionProportion - 1
	default:
		off -= PersonProportion
	}
	return epoch*AuctionProportion + off
}

// nextBase0PersonID picks one of the active people, or one a little ahead.
func nextBase0PersonID(n int64, r *javaRandom) int64 {
	people := lastBase0PersonID(n) + 1
	active := min(people, numActivePeople)
	return people - active + r.int63n(active+personIDLead)
}

// nextBase0AuctionID picks one of the auctions likely still open, or one a
// little ahead.
func nextBase0AuctionID(n int64, r *javaRandom) int64 {
	maxA := lastBase0AuctionID(n)
	minA := max(maxA-numInFlightAuctions, 0)
	return minA + r.int63n(maxA-minA+1+auctionIDLead)
}

// nextPrice is log-uniform between 100 and 10^8 cents: round(10^(6u)·100),
// computed as an exponential (cheaper than math.Pow).
func nextPrice(r *javaRandom) int64 {
	return int64(math.Round(math.Exp(r.float64()*(6*math.Ln10)) * 100))
}

func (g *Generator) bid(n int64, r *javaRandom, e *Event) {
	if r.intn(hotAuctionRatio) > 0 {
		e.Auction = (lastBase0AuctionID(n) / hotAuctionGroup) * hotAuctionGroup
	} else {
		e.Auction = nextBase0AuctionID(n, r)
	}
	e.Auction += FirstAuctionID
	if r.intn(hotBiddersRatio) > 0 {
		e.Bidder = (lastBase0PersonID(n)/hotBidderGroup)*hotBidderGroup + 1
	} else {
		e.Bidder = nextBase0PersonID(n, r)
	}
	e.Bidder += FirstPersonID
	e.Price = nextPrice(r)
	if r.intn(hotChannelsRatio) > 0 {
		i := r.intn(int32(len(hotChannels)))
		e.Channel, e.URL = g.hotNames[i], g.hotURLs[i]
	} else {
		i := r.intn(channelsNumber)
		e.Channel, e.URL = g.channelNames[i], g.channelURLs[i]
	}
	e.Extra = appendExtra(e.Extra[:0], r, 8+8+8+8, avgBidByteSize)
}

func (g *Generator) auction(n int64, r *javaRandom, e *Event) {
	e.AuctionID = lastBase0AuctionID(n) + FirstAuctionID
	if r.intn(hotSellersRatio) > 0 {
		e.Seller = (lastBase0PersonID(n) / hotSellerGroup) * hotSellerGroup
	} else {
		e.Seller = nextBase0PersonID(n, r)
	}
	e.Seller += FirstPersonID
	e.Category = FirstCategoryID + int64(r.intn(numCategories))
	e.InitialBid = nextPrice(r)
	// Auctions last on average as long as it takes to generate the number
	// of in-flight auctions.
	horizon := g.EventTime(n+numInFlightAuctions*TotalProportion/AuctionProportion) - e.DateTime
	e.Expires = e.DateTime + 1 + r.int63n(max(horizon*2, 1))
	e.ItemName = appendString(e.ItemName[:0], r, 20, ' ')
	e.Description = appendString(e.Description[:0], r, 100, ' ')
	e.Reserve = e.InitialBid + nextPrice(r)
	size := 8 + len(e.ItemName) + len(e.Description) + 8 + 8 + 8 + 8 + 8
	e.Extra = appendExtra(e.Extra[:0], r, size, avgAuctionByteSize)
}

func (g *Generator) person(n int64, r *javaRandom, e *Event) {
	e.PersonID = lastBase0PersonID(n) + FirstPersonID
	e.Name = append(e.Name[:0], firstNames[r.intn(int32(len(firstNames)))]...)
	e.Name = append(e.Name, ' ')
	e.Name = append(e.Name, lastNames[r.intn(int32(len(lastNames)))]...)
	e.EmailAddress = appendString(e.EmailAddress[:0], r, 7, ' ')
	e.EmailAddress = append(e.EmailAddress, '@')
	e.EmailAddress = appendString(e.EmailAddress, r, 5, ' ')
	e.EmailAddress = append(e.EmailAddress, ".com"...)
	e.CreditCard = e.CreditCard[:0]
	for i := range 4 {
		if i > 0 {
			e.CreditCard = append(e.CreditCard, ' ')
		}
		v := r.intn(10000)
		e.CreditCard = append(e.CreditCard, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
	}
	e.City = usCities[r.intn(int32(len(usCities)))]
	e.State = usStates[r.intn(int32(len(usStates)))]
	size := 8 + len(e.Name) + len(e.EmailAddress) + len(e.CreditCard) + len(e.City) + len(e.State)
	e.Extra = appendExtra(e.Extra[:0], r, size, avgPersonByteSize)
}

// appendString appends a random string of 3 to maxLength-1 letters with an
// occasional special character; a space special is trimmed at both ends.
func appendString(b []byte, r *javaRandom, maxLength int32, special byte) []byte {
	n := minStringLength + r.intn(maxLength-minStringLength)
	start := len(b)
	for range n {
		if r.intn(13) == 0 {
			b = append(b, special)
		} else {
			b = append(b, byte('a'+r.intn(26)))
		}
	}
	if special != ' ' {
		return b
	}
	s := b[start:]
	i, j := 0, len(s)
	for i < j && s[i] == ' ' {
		i++
	}
	for j > i && s[j-1] == ' ' {
		j--
	}
	m := copy(s, s[i:j])
	return b[:start+m]
}

// appendExactString appends n characters, six per random int as Nexmark's
// nextExactString does (a negative draw gives characters below 'a').
func appendExactString(b []byte, r *javaRandom, n int) []byte {
	var rnd, left int32
	for range n {
		if left == 0 {
			rnd = r.nextInt()
			left = 6
		}
		b = append(b, byte('a'+rnd%26))
		rnd /= 26
		left--
	}
	return b
}

// appendExtra pads an event so that its size averages desiredAvg bytes.
func appendExtra(b []byte, r *javaRandom, currentSize, desiredAvg int) []byte {
	if currentSize > desiredAvg {
		return b
	}
	desiredAvg -= currentSize
	delta := int(math.Round(float64(desiredAvg) * 0.2))
	size := desiredAvg - delta
	if delta != 0 {
		size += int(r.intn(int32(2 * delta)))
	}
	return appendExactString(b, r, size)
}
