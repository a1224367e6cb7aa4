package kafka

import (
	"slices"
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
