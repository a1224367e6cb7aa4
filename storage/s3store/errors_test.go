package s3store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestScrub(t *testing.T) {
	base := errors.New("root cause")
	const access, secret = "AKIAEXAMPLEKEY", "very/secret+value"
	err := fmt.Errorf("sign with %s and %s twice %s: %w", access, secret, secret, base)
	got := scrub(err, []string{access, secret, "", "ab"})
	if strings.Contains(got.Error(), access) || strings.Contains(got.Error(), secret) {
		t.Fatalf("scrub left a credential: %s", got)
	}
	if !strings.Contains(got.Error(), "[redacted]") || !strings.Contains(got.Error(), "root cause") {
		t.Fatalf("scrub lost the message: %s", got)
	}
	if !errors.Is(got, base) {
		t.Fatalf("scrub broke errors.Is")
	}
	if clean := errors.New("nothing to hide"); scrub(clean, []string{access}) != clean {
		t.Fatalf("scrub wrapped an error with nothing to hide")
	}
	if scrub(nil, []string{access}) != nil {
		t.Fatalf("scrub(nil) is not nil")
	}
}
