// Package nexmark generates the Nexmark benchmark's events (people,
// auctions and bids of an online auction site) as a source for the engine,
// and as JSON for a Kafka producer.
//
// # Events
//
// Events are numbered 0, 1, 2, …; every field of event n is a pure function
// of n and the options, never of the clock or of when it is read. Of every
// 50 consecutive numbers the first is a person, the next three auctions and
// the other 46 bids. The fields follow the reference generators (Beam's
// and Flink's Nexmark): each event draws from a java.util.Random-compatible
// generator seeded with n; ids start at 1000; most bids go to a "hot"
// auction (1 - 1/2) and come from a hot bidder (1 - 1/4); prices are
// log-uniform between 100 and 10^8 (cents: round(10^(6u)·100), u uniform);
// half of the bids carry one of four hot channels, the others one of
// 10,000 channel-N, each with its URL; extra pads events to Nexmark's
// average sizes (100 bytes a bid). Event n happens at
// base + n·interEventDelay, truncated to milliseconds; the delay is
// 1/eventsPerSecond (default 10,000/s, Nexmark's default rate) and the
// base defaults to 2026-01-01T00:00:00Z. An auction expires a random time
// averaging the time it takes to create 100 auctions after it starts.
// Departures from the reference: the URLs of channels are seeded (the
// reference draws them unseeded), and out-of-order groups, rate shapes
// and wall-clock event times are not offered.
//
// # Schemas
//
// By default a record row is one event, flattened (EventSchema):
// event_type int8 (0 person, 1 auction, 2 bid), date_time timestamp[us,
// UTC], extra, then the person, auction and bid columns, null on the rows
// of other kinds. WithBidsOnly emits only the bids with BidSchema (auction,
// bidder, price, channel, url, date_time, extra) — what Nexmark q0–q2, q5
// and q7 read — while keeping the numbering of the full stream.
//
// # Offsets
//
// An offset is {"events":N}, the number of event numbers before the
// position; a batch [start, end) covers numbers start <= n < end (in
// bids-only mode, the bids among them). WithTotalEvents(n) makes the
// source bounded: all n events are available at once and LatestOffset never
// goes beyond n, so an AvailableNow query terminates. Without it events
// arrive by the clock at the events-per-second rate from New, as in
// source/rate. WithMaxEventsPerTrigger caps every batch.
//
// # Lifecycle and concurrency
//
// New, then any number of LatestOffset and Read calls; no Close. A Source
// and its Generator are safe for concurrent use. Read builds Arrow arrays
// directly (no per-row allocation) in records covering at most
// WithBatchSize event numbers, each released after emit returns.
package nexmark
