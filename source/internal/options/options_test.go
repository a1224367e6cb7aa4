package options

import (
	"errors"
	"fmt"
	"testing"
)

var errBad = errors.New("test: bad option")

func TestValidate(t *testing.T) {
	if errs := Defaults().Validate(errBad); len(errs) != 0 {
		t.Fatalf("defaults: %v", errs)
	}
	tests := []struct {
		name string
		c    Common
		want string
	}{
		{"batch size", Common{BatchSize: 0, Clock: Defaults().Clock, Mem: Defaults().Mem}, "[test: bad option: batch size 0 is not positive]"},
		{"all", Common{BatchSize: -1}, "[test: bad option: batch size -1 is not positive test: bad option: nil clock test: bad option: nil allocator]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.c.Validate(errBad)
			if got := fmt.Sprint(errs); got != tc.want {
				t.Fatalf("Validate = %s, want %s", got, tc.want)
			}
			for _, err := range errs {
				if !errors.Is(err, errBad) {
					t.Fatalf("%v does not wrap the sentinel", err)
				}
			}
		})
	}
}

func TestMaxPerTrigger(t *testing.T) {
	if err := MaxPerTrigger(0, "rows", errBad); err != nil {
		t.Fatal(err)
	}
	if err := MaxPerTrigger(-3, "events", errBad); !errors.Is(err, errBad) || err.Error() != "test: bad option: max events per trigger -3 is negative" {
		t.Fatalf("MaxPerTrigger(-3) = %v", err)
	}
}
