package kafka

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int64
		lags  []int64
		want  []int64
	}{
		{"no cap", 0, []int64{5, 0, 7}, []int64{5, 0, 7}},
		{"fits", 100, []int64{5, 0, 7}, []int64{5, 0, 7}},
		{"proportional", 10, []int64{50, 50}, []int64{5, 5}},
		{"small partition not starved", 10, []int64{1000, 1}, []int64{9, 1}},
		{"largest remainder", 10, []int64{3, 3, 3, 3}, []int64{3, 3, 2, 2}},
		{"fewer offsets than partitions", 2, []int64{1, 9, 9, 0}, []int64{0, 1, 1, 0}},
		{"skewed", 20, []int64{100, 10, 1}, []int64{17, 2, 1}},
		{"huge numbers", 1 << 61, []int64{1 << 61, 1 << 61}, []int64{1 << 60, 1 << 60}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := spread(tc.limit, tc.lags)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("spread(%d, %v) = %v, want %v", tc.limit, tc.lags, got, tc.want)
			}
			var sum, total int64
			for i := range got {
				sum += got[i]
				total += tc.lags[i]
				if got[i] > tc.lags[i] || got[i] < 0 {
					t.Fatalf("partition %d gets %d of lag %d", i, got[i], tc.lags[i])
				}
			}
			if tc.limit > 0 && sum != min(tc.limit, total) {
				t.Fatalf("sum %d, want %d", sum, min(tc.limit, total))
			}
		})
	}
}

func TestOffsetsEncoding(t *testing.T) {
	o := Offsets{"b": {10: 1, 2: 3}, "a": {0: 42}}
	got := string(o.encode())
	want := `{"a":{"0":42},"b":{"2":3,"10":1}}`
	if got != want {
		t.Fatalf("encode = %s, want %s", got, want)
	}
	back, err := ParseOffsets([]byte(got))
	if err != nil {
		t.Fatal(err)
	}
	if string(back.encode()) != want {
		t.Fatalf("round trip = %s", back.encode())
	}
	for _, bad := range []string{`[]`, `{"a":{"x":1}}`, `{"a":{"0":-1}}`, `{"":{"0":1}}`, `{"a":{"-1":1}}`} {
		if _, err := ParseOffsets([]byte(bad)); err == nil {
			t.Errorf("ParseOffsets(%s) succeeded", bad)
		}
	}
}

func TestPositionEncoding(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	p := Position{
		Offsets:  Offsets{"b": {10: 1, 2: 3}, "a": {0: 42}, "empty": {}},
		TopicIDs: map[string]string{"a": id},
		From:     Offsets{"b": {10: 0}},
	}
	want := `{"v":2,"topics":{"a":{"id":"` + id + `","partitions":{"0":42}},"b":{"partitions":{"2":3,"10":1},"from":{"10":0}}}}`
	if got := string(p.encode()); got != want {
		t.Fatalf("encode = %s, want %s", got, want)
	}
	back, err := ParsePosition([]byte(want))
	if err != nil {
		t.Fatal(err)
	}
	if back.Version != 2 || string(back.encode()) != want {
		t.Fatalf("round trip = version %d %s", back.Version, back.encode())
	}

	for _, tc := range []struct {
		name, raw string
		want      string // the version-2 encoding, or "" for an error
		err       string
	}{
		{"version 1", `{"a":{"0":42}}`, `{"v":2,"topics":{"a":{"partitions":{"0":42}}}}`, ""},
		{"version 1, a topic named v", `{"v":{"0":1}}`, `{"v":2,"topics":{"v":{"partitions":{"0":1}}}}`, ""},
		{"version 1, empty", `{}`, `{"v":2,"topics":{}}`, ""},
		{"newer version", `{"v":3,"topics":{}}`, "", "position version 3"},
		{"bad id", `{"v":2,"topics":{"a":{"id":"xyz","partitions":{"0":1}}}}`, "", `id "xyz" is not 32 hex digits`},
		{"from above the offset", `{"v":2,"topics":{"a":{"partitions":{"0":1},"from":{"0":2}}}}`, "", "from 2 without a partition offset at or above it"},
		{"from without the partition", `{"v":2,"topics":{"a":{"partitions":{"0":1},"from":{"1":0}}}}`, "", "partition 1: from 0"},
		{"unknown field", `{"v":2,"topics":{"a":{"partitions":{"0":1},"x":1}}}`, "", "unknown field"},
		{"negative offset", `{"v":2,"topics":{"a":{"partitions":{"0":-1}}}}`, "", "offset -1"},
		{"not an object", `[]`, "", "bad offsets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePosition([]byte(tc.raw))
			if tc.want == "" {
				if !errors.Is(err, ErrBadOffsets) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParsePosition(%s) = %v, want an error naming %q", tc.raw, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(p.encode()); got != tc.want {
				t.Fatalf("encode = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestPositionFirst: where a batch begins reading a partition of its end.
func TestPositionFirst(t *testing.T) {
	const x, y = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	tp := topicPartition{"a", 0}
	for _, tc := range []struct {
		name       string
		start, end Position
		want       int64
	}{
		{"in start", Position{Offsets: Offsets{"a": {0: 5}}, TopicIDs: map[string]string{"a": x}},
			Position{Offsets: Offsets{"a": {0: 9}}, TopicIDs: map[string]string{"a": x}}, 5},
		{"version-1 start", Position{Offsets: Offsets{"a": {0: 5}}},
			Position{Offsets: Offsets{"a": {0: 9}}, TopicIDs: map[string]string{"a": x}}, 5},
		{"new, with from", Position{Offsets: Offsets{}},
			Position{Offsets: Offsets{"a": {0: 9}}, From: Offsets{"a": {0: 4}}}, 4},
		{"new, version-1 end", Position{Offsets: Offsets{}}, Position{Offsets: Offsets{"a": {0: 9}}}, 0},
		{"created again", Position{Offsets: Offsets{"a": {0: 5}}, TopicIDs: map[string]string{"a": x}},
			Position{Offsets: Offsets{"a": {0: 9}}, TopicIDs: map[string]string{"a": y}, From: Offsets{"a": {0: 2}}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.end.first(tc.start, tp); got != tc.want {
				t.Fatalf("first = %d, want %d", got, tc.want)
			}
		})
	}
}
