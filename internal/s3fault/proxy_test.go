package s3fault_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/s3fault"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
)

// through returns a store on a fresh bucket that reaches the S3 server
// through a new proxy, with attempts SDK attempts per request (0: the
// SDK's default), and a store that reaches it directly.
func through(t *testing.T, attempts int) (*s3fault.Proxy, storage.Store, storage.Store) {
	t.Helper()
	loc := testenv.S3Bucket(t)
	p, err := s3fault.Start(os.Getenv(testenv.S3EnvVar), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	o := loc.Options
	o.Endpoint, o.MaxAttempts = p.URL(), attempts
	via, err := s3store.New(context.Background(), loc.Bucket, "q", o)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := s3store.New(context.Background(), loc.Bucket, "q", loc.Options)
	if err != nil {
		t.Fatal(err)
	}
	return p, via, direct
}

// TestPassThrough checks that requests without a rule reach the server
// with valid signatures, every kind of call.
func TestPassThrough(t *testing.T) {
	p, s, _ := through(t, 1)
	ctx := context.Background()
	if err := s.PutIfAbsent(ctx, "commits/1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "commits/1", []byte("two")); !storage.IsExist(err) {
		t.Fatalf("second put-if-absent: %v, want ErrExist", err)
	}
	if err := s.Put(ctx, "state/a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Get(ctx, "commits/1"); err != nil || string(b) != "one" {
		t.Fatalf("get: %q, %v", b, err)
	}
	infos, err := s.List(ctx, "")
	if err != nil || len(infos) != 2 {
		t.Fatalf("list: %+v, %v", infos, err)
	}
	if err := s.Delete(ctx, "commits/1", "state/a"); err != nil {
		t.Fatal(err)
	}
	if p.Requests() < 6 || len(p.Events()) != 0 {
		t.Errorf("%d requests, %d events", p.Requests(), len(p.Events()))
	}
}

// TestActions checks what each action does to one call, with the SDK's
// retries off (the caller sees the fault) and on (it rides through a
// single fault), and what the server holds afterwards.
func TestActions(t *testing.T) {
	type held int
	const (
		absent held = iota
		stored
	)
	cases := []struct {
		name     string
		rule     s3fault.Rule
		call     string // put-if-absent, put, get
		want     string // in the error with one attempt
		after    held   // the object afterwards, with one attempt
		retryErr error  // with retries: nil, or what the caller gets
	}{
		{"500 on put-if-absent", s3fault.Rule{Method: "PUT", Action: s3fault.InternalError}, "put-if-absent", "InternalError", absent, nil},
		{"503 on put", s3fault.Rule{Method: "PUT", Action: s3fault.SlowDown}, "put", "SlowDown", absent, nil},
		{"503 on get", s3fault.Rule{Method: "GET", Key: "q/obj", Action: s3fault.SlowDown}, "get", "SlowDown", stored, nil},
		{"reset mid-body of a put", s3fault.Rule{Method: "PUT", Action: s3fault.ResetBody}, "put-if-absent", "connection reset", absent, nil},
		// The SDK retries a request whose answer did not come, not the
		// read of a body cut after its headers: s3store's Get reports it
		// (this case turns to nil when s3store retries such reads).
		{"reset mid-body of a get", s3fault.Rule{Method: "GET", Key: "q/obj", Action: s3fault.ResetBody}, "get", "connection reset", stored, errAny},
		// The server stored the object and the answer was lost: the
		// retry finds the name taken, by the caller's own bytes.
		{"lost put-if-absent response", s3fault.Rule{Method: "PUT", Action: s3fault.LoseResponse}, "put-if-absent", "connection reset", stored, storage.ErrExist},
		{"lost put response", s3fault.Rule{Method: "PUT", Action: s3fault.LoseResponse}, "put", "connection reset", stored, nil},
	}
	for _, c := range cases {
		for _, attempts := range []int{1, 0} {
			t.Run(fmt.Sprintf("%s/attempts=%d", c.name, attempts), func(t *testing.T) {
				p, s, direct := through(t, attempts)
				ctx := context.Background()
				if c.call == "get" {
					if err := direct.Put(ctx, "obj", []byte("payload of obj")); err != nil {
						t.Fatal(err)
					}
				}
				p.SetRules(c.rule)
				var err error
				switch c.call {
				case "put-if-absent":
					err = s.PutIfAbsent(ctx, "obj", []byte("payload of obj"))
				case "put":
					err = s.Put(ctx, "obj", []byte("payload of obj"))
				case "get":
					var b []byte
					b, err = s.Get(ctx, "obj")
					if err == nil && string(b) != "payload of obj" {
						t.Fatalf("get returned %q", b)
					}
				}
				if len(p.Events()) != 1 {
					t.Fatalf("%d events, want 1: %v", len(p.Events()), p.Events())
				}
				if attempts == 1 {
					if err == nil || !strings.Contains(err.Error(), c.want) {
						t.Fatalf("with one attempt: %v, want an error containing %q", err, c.want)
					}
				} else if c.retryErr == errAny && err == nil || c.retryErr != errAny && !errors.Is(err, c.retryErr) {
					t.Fatalf("with retries: %v, want %v", err, c.retryErr)
				}
				b, gerr := direct.Get(ctx, "obj")
				switch {
				case attempts == 1 && c.after == absent && !storage.IsNotExist(gerr):
					t.Errorf("the server holds %q (%v), want nothing", b, gerr)
				case (attempts == 0 || c.after == stored) && (gerr != nil || string(b) != "payload of obj"):
					t.Errorf("the server holds %q (%v), want the payload", b, gerr)
				}
			})
		}
	}
}

// errAny stands for any error.
var errAny = errors.New("any error")

// TestStall checks that a stalled request is answered after the stall and
// that the caller's deadline ends it first when shorter.
func TestStall(t *testing.T) {
	p, s, direct := through(t, 1)
	ctx := context.Background()
	p.SetRules(s3fault.Rule{Method: "PUT", Action: s3fault.Stall, Stall: 200 * time.Millisecond})
	if err := s.Put(ctx, "a", []byte("a")); err != nil {
		t.Fatalf("stalled put: %v", err)
	}
	p.SetRules(s3fault.Rule{Method: "PUT", Action: s3fault.Stall}) // 10s
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := s.Put(short, "b", []byte("b")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put stalled past its deadline: %v", err)
	}
	if _, err := direct.Get(ctx, "b"); !storage.IsNotExist(err) {
		t.Errorf("the server holds b after the stalled put was abandoned: %v", err)
	}
	if n := len(p.Events()); n != 2 {
		t.Errorf("%d events, want 2", n)
	}
}

// TestNthTimesAndProbability checks the selection of requests.
func TestNthTimesAndProbability(t *testing.T) {
	p, s, _ := through(t, 1)
	ctx := context.Background()
	p.SetRules(s3fault.Rule{Method: "PUT", Key: "q/b/*", Nth: 2, Times: 2, Action: s3fault.InternalError})
	var failed []int
	for i := 1; i <= 8; i++ {
		dir := []string{"a", "b"}[i%2]
		if err := s.Put(ctx, fmt.Sprintf("%s/%d", dir, i), []byte("x")); err != nil {
			failed = append(failed, i)
		}
	}
	if fmt.Sprint(failed) != "[3 5]" {
		t.Errorf("puts %v failed, want [3 5] (the 2nd and 3rd under b/)", failed)
	}
	hits := func(seed uint64) string {
		q, err := s3fault.Start(os.Getenv(testenv.S3EnvVar), seed)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		q.SetRules(s3fault.Rule{Method: "PUT", Prob: 0.5, Action: s3fault.InternalError})
		loc := testenv.S3Bucket(t)
		o := loc.Options
		o.Endpoint, o.MaxAttempts = q.URL(), 1
		st, err := s3store.New(ctx, loc.Bucket, "", o)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i := range 24 {
			if st.Put(ctx, fmt.Sprint("k", i), []byte("x")) != nil {
				got = append(got, fmt.Sprint(i))
			}
		}
		return strings.Join(got, ",")
	}
	a, b, c := hits(7), hits(7), hits(8)
	if a != b || a == c || a == "" {
		t.Errorf("seed 7 failed puts %s then %s; seed 8 %s", a, b, c)
	}
}

func TestParseAction(t *testing.T) {
	for _, a := range []s3fault.Action{s3fault.InternalError, s3fault.SlowDown, s3fault.ResetBody, s3fault.Stall, s3fault.LoseResponse} {
		got, err := s3fault.ParseAction(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAction(%q) = %v, %v", a, got, err)
		}
	}
	if _, err := s3fault.ParseAction("boom"); err == nil || !strings.Contains(err.Error(), "want 500, 503-slowdown") {
		t.Errorf("ParseAction(boom): %v", err)
	}
}
