package files

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Review: WithMaxFileAge(d) forgets old entries at compaction, and only the
// listing's age rule (newest − d) keeps their files from being taken again.
// That rule is the option in force now, not the one that forgot: a restart
// with a larger age, or without the option, lists the forgotten files as
// new and takes them a second time (their rows enter twice). A compaction
// must remember how far it forgot, whatever the options of a later run.
func TestReviewForgottenFilesNotRetakenWhenAgeChanges(t *testing.T) {
	const step = 5 * time.Second
	for _, tc := range []struct {
		name  string
		later []Option
	}{
		{"age removed", nil},
		{"age raised", []Option{WithMaxFileAge(time.Hour)}},
		{"age raised, interval changed", []Option{WithMaxFileAge(time.Hour), WithLogCompactInterval(3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			store := checkpoint(t)
			base := []Option{WithMaxFilesPerTrigger(1), WithLogCompactInterval(2)}
			s := open(t, store, dir, JSON, payments(), append(base, WithMaxFileAge(2*step))...)
			k := int64(-1)
			const files = 12
			for i := range files {
				landing(t, dir, fmt.Sprintf("f%02d.json", i), payment(i), time.Duration(i)*step)
				next := latest(t, s, k)
				if next != k+1 {
					t.Fatalf("file %d not taken", i)
				}
				if err := s.Commit(ctx, EncodeOffset(next)); err != nil {
					t.Fatal(err)
				}
				k = next
			}
			if _, ok := s.mu.entries[0]; ok {
				t.Fatal("entry 0 was not forgotten; the test needs it to be")
			}
			// A later run, other options: nothing in the landing directory is
			// new, and a later compaction must not forget that either.
			s = open(t, store, dir, JSON, payments(), append(base, tc.later...)...)
			for range 3 {
				if next := latest(t, s, k); next != k {
					t.Fatalf("entry %d took %s again: files a compaction forgot were taken twice", next, loggedNames(s, next))
				}
				landing(t, dir, fmt.Sprintf("n%02d.json", k), payment(int(k)), time.Duration(k+1)*step)
				next := latest(t, s, k)
				if next != k+1 || loggedNames(s, next) != fmt.Sprintf("[n%02d.json]", k) {
					t.Fatalf("entry %d took %s, want only the new file", next, loggedNames(s, next))
				}
				if err := s.Commit(ctx, EncodeOffset(next)); err != nil {
					t.Fatal(err)
				}
				k = next
				s = open(t, store, dir, JSON, payments(), append(base, tc.later...)...)
			}
		})
	}
}
