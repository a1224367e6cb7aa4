package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/memsink"
)

// legacyAtLeastOnceSink reports its guarantee the way sinks did before
// contract.Guarantee existed: Guarantee() string.
type legacyAtLeastOnceSink struct{ *memsink.Sink }

func (legacyAtLeastOnceSink) Guarantee() string { return "at-least-once" }

var _ Sink = legacyAtLeastOnceSink{}

// Regression: GuaranteeReporter's Guarantee() became contract.Guarantee,
// and a sink still declaring Guarantee() string no longer matched it, so it
// was taken as exactly-once and ran without WithAtLeastOnce; now the old
// form is honoured, and such a sink is refused unless allowed.
func TestLegacyStringGuaranteeIsHonoured(t *testing.T) {
	sink := legacyAtLeastOnceSink{memsink.New("legacy")}
	_, err := runQuery(t, ReadStream(newSeq(5, 0, 1)), WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(Once()))
	if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), "runs at-least-once") {
		t.Fatalf("an at-least-once sink with Guarantee() string ran without WithAtLeastOnce: err %v, batches %v", err, sink.BatchIDs())
	}
	var got []Guarantee
	q, err := runQuery(t, ReadStream(newSeq(5, 0, 1)), WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(Once()), WithAtLeastOnce(),
		WithProgressListener(func(p Progress) { got = append(got, p.Sinks[0].Guarantee) }))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != AtLeastOnce || q.LastProgress() == nil {
		t.Fatalf("progress guarantees %v, want [at-least-once]", got)
	}
}

func TestSinkGuarantee(t *testing.T) {
	cases := []struct {
		name string
		sink Sink
		want Guarantee
	}{
		{"no reporter is exactly-once", memsink.New("m"), ExactlyOnce},
		{"reporter", &atLeastOnceSink{}, AtLeastOnce},
		{"legacy string reporter", legacyAtLeastOnceSink{memsink.New("l")}, AtLeastOnce},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := guarantee(tc.sink); got != tc.want {
				t.Fatalf("guarantee = %q, want %q", got, tc.want)
			}
		})
	}
}
