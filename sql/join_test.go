package sql

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/memsink"
)

// runAll runs the sink AvailableNow and returns every row it received.
func runAll(t *testing.T, p *Program, sink string) [][]any {
	t.Helper()
	out := memsink.New("out")
	q, err := p.Open(context.Background(), sink, WithSink(out))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rows [][]any
	for _, id := range out.BatchIDs() {
		rows = append(rows, out.Batch(id)...)
	}
	return sortRows(rows)
}

// A stream–stream LEFT JOIN with a time range: matches within ten minutes,
// the unmatched auction once the watermark passes it; a.x / b.x name the
// clashing columns (the engine's left_x / right_x).
func TestRunStreamStreamJoin(t *testing.T) {
	auctions, bids := t.TempDir(), t.TempDir()
	writeLines(t, auctions, "1.json",
		`{"id":"a1","seller":"s1","ts":"2026-11-30T10:00:00Z"}`,
		`{"id":"a2","seller":"s2","ts":"2026-11-30T10:01:00Z"}`,
		`{"id":"a3","seller":"s3","ts":"2026-11-30T10:02:00Z"}`)
	writeLines(t, auctions, "2.json", `{"id":"a9","seller":"s9","ts":"2026-11-30T12:00:00Z"}`)
	writeLines(t, bids, "1.json",
		`{"id":"a1","price":10,"ts":"2026-11-30T10:05:00Z"}`,
		`{"id":"a1","price":12,"ts":"2026-11-30T10:09:59Z"}`,
		`{"id":"a1","price":99,"ts":"2026-11-30T10:11:00Z"}`,
		`{"id":"a2","price":7,"ts":"2026-11-30T10:02:00Z"}`)
	writeLines(t, bids, "2.json", `{"id":"a9","price":1,"ts":"2026-11-30T12:00:00Z"}`)
	text := fmt.Sprintf(`
CREATE SOURCE auctions (id text, seller text, ts timestamp, WATERMARK FOR ts AS ts - INTERVAL '1 second')
  WITH (connector = 'files', path = '%s', max_files_per_trigger = '1');
CREATE SOURCE bids (id text, price bigint, ts timestamp, WATERMARK FOR ts AS ts - INTERVAL '1 second')
  WITH (connector = 'files', path = '%s', max_files_per_trigger = '1');
CREATE SINK matched WITH (connector = 'console') AS
SELECT a.id, a.seller, b.price, b.ts AS bid_ts
FROM auctions AS a LEFT JOIN /*+ id('auction-bids') */ bids AS b
  ON a.id = b.id AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '10 minutes'
WHERE a.id <> 'a9';
CREATE SINK everything WITH (connector = 'console') AS
SELECT a.id AS aid, b.id AS bid, b.price
FROM auctions a FULL JOIN bids b ON a.id = b.id AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '10 minutes'
WHERE coalesce(a.id, b.id) <> 'a9';
CREATE SINK bids_first WITH (connector = 'console') AS
SELECT b.id, b.price, a.seller
FROM bids b RIGHT JOIN auctions a ON a.id = b.id AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '10 minutes'
WHERE a.id <> 'a9';
`, auctions, bids)
	p, err := Compile(text, WithTrigger(engine.AvailableNow()), WithCheckpointRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.Explain(context.Background(), &buf, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"join [auction-bids](leftOuter, a.id = b.id and b.ts between a.ts and a.ts + 10m0s; right: source bids, watermark ts - 1s)",
		"auction-bids: join keyed by (a.id = b.id, b.ts between a.ts and a.ts + 10m0s), id from the id hint",
		"source bids:",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("EXPLAIN lacks %q:\n%s", want, buf.String())
		}
	}
	got := fmt.Sprint(runAll(t, p, "matched"))
	want := "[[a1 s1 10 2026-11-30 10:05:00 +0000 UTC] [a1 s1 12 2026-11-30 10:09:59 +0000 UTC] [a2 s2 7 2026-11-30 10:02:00 +0000 UTC] [a3 s3 <nil> <nil>]]"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// FULL: the bid outside every range comes out alone once the watermark
	// passes it.
	got = fmt.Sprint(runAll(t, p, "everything"))
	want = "[[<nil> a1 99] [a1 a1 10] [a1 a1 12] [a2 a2 7] [a3 <nil> <nil>]]"
	if got != want {
		t.Fatalf("full: got  %s\nwant %s", got, want)
	}
	// RIGHT with the sides written the other way round: the range is
	// mirrored (a.ts BETWEEN b.ts - 10m AND b.ts).
	got = fmt.Sprint(runAll(t, p, "bids_first"))
	want = "[[<nil> <nil> s3] [a1 10 s1] [a1 12 s1] [a2 7 s2]]"
	if got != want {
		t.Fatalf("right: got  %s\nwant %s", got, want)
	}
}

// A stream–table join: each payment joins the table's current row of its
// key (the latest update wins; a row with a null segment deletes it).
func TestRunStreamTableJoin(t *testing.T) {
	payments, profiles := t.TempDir(), t.TempDir()
	writeLines(t, profiles, "1.json",
		`{"customer_id":"c1","segment":"retail","tier":1}`,
		`{"customer_id":"c2","segment":"gold","tier":3}`,
		`{"customer_id":"c1","segment":"vip","tier":2}`,
		`{"customer_id":"c3","segment":"retail","tier":1}`,
		`{"customer_id":"c3","segment":null,"tier":null}`)
	writeLines(t, payments, "1.json",
		`{"payment_id":"p1","customer_id":"c1","amount":100}`,
		`{"payment_id":"p2","customer_id":"c2","amount":200}`,
		`{"payment_id":"p3","customer_id":"c3","amount":300}`,
		`{"payment_id":"p4","customer_id":"c4","amount":400}`)
	text := fmt.Sprintf(`
CREATE SOURCE payments (payment_id text, customer_id text, amount bigint)
  WITH (connector = 'files', path = '%s');
CREATE TABLE profiles (customer_id text, segment text, tier bigint, PRIMARY KEY (customer_id))
  WITH (connector = 'files', path = '%s', delete_when_null = 'segment');
CREATE SINK enriched WITH (connector = 'console') AS
SELECT p.payment_id, p.customer_id, t.segment, t.tier, p.amount * 2 AS doubled
FROM payments p LEFT JOIN profiles t ON p.customer_id = t.customer_id;
CREATE SINK inner_only WITH (connector = 'console') AS
SELECT payment_id, segment FROM payments JOIN profiles USING (customer_id);
`, payments, profiles)
	p, err := Compile(text, WithTrigger(engine.AvailableNow()), WithCheckpointRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.Explain(context.Background(), &buf, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"join table [enriched-jointable-1](leftOuter, p.customer_id = t.customer_id; table profiles keyed by customer_id)",
		"enriched-jointable-1: jointable keyed by (p.customer_id = t.customer_id), id named by the rule",
		"table profiles:",
		"primary key: customer_id, deleted when IsNull(segment)",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("EXPLAIN lacks %q:\n%s", want, buf.String())
		}
	}
	got := fmt.Sprint(runAll(t, p, "enriched"))
	want := "[[p1 c1 vip 2 200] [p2 c2 gold 3 400] [p3 c3 <nil> <nil> 600] [p4 c4 <nil> <nil> 800]]"
	if got != want {
		t.Fatalf("enriched: got  %s\nwant %s", got, want)
	}
	got = fmt.Sprint(runAll(t, p, "inner_only"))
	want = "[[p1 vip] [p2 gold]]"
	if got != want {
		t.Fatalf("inner_only: got  %s\nwant %s", got, want)
	}
}

// A kafka table read with tombstones: a record with a null value deletes
// its key (the key column falls back to the record key).
func TestRunKafkaTableTombstones(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"payments": 1, "profiles": 1})
	testenv.KafkaProduce(t, c,
		&kgo.Record{Topic: "profiles", Key: []byte("c1"), Value: []byte(`{"customer_id":"c1","segment":"retail"}`)},
		&kgo.Record{Topic: "profiles", Key: []byte("c2"), Value: []byte(`{"customer_id":"c2","segment":"gold"}`)},
		&kgo.Record{Topic: "profiles", Key: []byte("c2")}, // a tombstone
		&kgo.Record{Topic: "payments", Value: []byte(`{"payment_id":"p1","customer_id":"c1"}`)},
		&kgo.Record{Topic: "payments", Value: []byte(`{"payment_id":"p2","customer_id":"c2"}`)},
	)
	text := fmt.Sprintf(`
CREATE SOURCE payments (payment_id text, customer_id text) WITH (connector = 'kafka', brokers = '%[1]s', topics = 'payments');
CREATE TABLE profiles (customer_id text, segment text, PRIMARY KEY (customer_id))
  WITH (connector = 'kafka', brokers = '%[1]s', topics = 'profiles', tombstones = 'true');
CREATE SINK enriched WITH (connector = 'console') AS
SELECT p.payment_id, t.segment FROM payments p LEFT JOIN profiles t ON p.customer_id = t.customer_id;
`, strings.Join(c.Addrs(), ","))
	p, err := Compile(text, WithTrigger(engine.AvailableNow()), WithCheckpointRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.Explain(context.Background(), &buf, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "primary key: customer_id, deleted when IsNull(segment)") {
		t.Errorf("EXPLAIN:\n%s", buf.String())
	}
	got := fmt.Sprint(runAll(t, p, "enriched"))
	if want := "[[p1 retail] [p2 <nil>]]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// WHERE EXISTS (SELECT … FROM b WHERE b.k = a.k AND b.ts BETWEEN …) is a
// left semi join: each auction with a bid in its first ten minutes, once.
func TestRunExistsSemiJoin(t *testing.T) {
	auctions, bids := t.TempDir(), t.TempDir()
	writeLines(t, auctions, "1.json",
		`{"id":"a1","seller":"s1","ts":"2026-11-30T10:00:00Z"}`,
		`{"id":"a2","seller":"s2","ts":"2026-11-30T10:01:00Z"}`,
		`{"id":"a3","seller":"s3","ts":"2026-11-30T10:02:00Z"}`)
	writeLines(t, bids, "1.json",
		`{"id":"a1","price":10,"ts":"2026-11-30T10:05:00Z"}`,
		`{"id":"a1","price":12,"ts":"2026-11-30T10:06:00Z"}`,
		`{"id":"a3","price":7,"ts":"2026-11-30T10:30:00Z"}`)
	text := fmt.Sprintf(`
CREATE SOURCE auctions (id text, seller text, ts timestamp) WITH (connector = 'files', path = '%s');
CREATE SOURCE bids (id text, price bigint, ts timestamp) WITH (connector = 'files', path = '%s');
CREATE SINK with_bids WITH (connector = 'console') AS
SELECT a.id, seller FROM auctions a
WHERE seller <> 's9' AND EXISTS (SELECT 1 FROM bids b WHERE b.id = a.id AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '10 minutes');
`, auctions, bids)
	p, err := Compile(text, WithTrigger(engine.AvailableNow()), WithCheckpointRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.Explain(context.Background(), &buf, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "join [with_bids-semijoin-1](leftSemi, a.id = b.id and b.ts between a.ts and a.ts + 10m0s; right: source bids)") {
		t.Errorf("EXPLAIN:\n%s", buf.String())
	}
	got := fmt.Sprint(runAll(t, p, "with_bids"))
	if want := "[[a1 s1]]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
