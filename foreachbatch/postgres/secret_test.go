package postgres

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/internal/testenv"
)

// lockedBuffer is a log sink safe for the pool's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// assertNoSecret fails when text holds the password in any encoding a DSN
// may carry it.
func assertNoSecret(t *testing.T, what, text, password string) {
	t.Helper()
	for _, enc := range []string{password, url.QueryEscape(password), url.PathEscape(password)} {
		if strings.Contains(text, enc) {
			t.Errorf("%s contains the password (as %q): %s", what, enc, text)
		}
	}
}

func withPassword(t *testing.T, base, password, host string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal("bad test URL")
	}
	u.User = url.UserPassword(u.User.Username(), password)
	if host != "" {
		u.Host = host
	}
	return u.String()
}

// TestPasswordNeverInErrors provokes every kind of error with a pool whose
// password is a recognisable string, and checks no error or log line
// carries it.
func TestPasswordNeverInErrors(t *testing.T) {
	base := testenv.PGURL(t)
	const wrong = "Wr0ng-p@ss word/%?&="
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := kvRecord(t, mem, kvSchema, []int64{1}, []*int64{i64(1)})
	defer rec.Release()

	t.Run("wrong password", func(t *testing.T) {
		dsn := withPassword(t, base, wrong, "")
		_, err := Connect(ctx, dsn)
		if err == nil {
			t.Fatal("Connect with a wrong password succeeded")
		}
		assertNoSecret(t, "Connect error", err.Error(), wrong)
		if !strings.Contains(err.Error(), "password authentication failed") {
			t.Errorf("error does not say why: %v", err)
		}

		pool, err := pgxpool.New(ctx, dsn) // lazy: no connection yet
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var logs lockedBuffer
		s, err := NewOffsetsInSink(pool, "j", "t", WithKeyColumns("k"), WithLogger(newTextLogger(&logs)))
		if err != nil {
			t.Fatal(err)
		}
		errs := []error{
			s.Start(ctx, "q"),
			s.ValidateSchema(kvSchema),
			s.AddBatch(ctx, 0, kvSchema, []arrow.RecordBatch{rec}),
		}
		up, err := NewUpsert(pool, "t", WithKeyColumns("k"))
		if err != nil {
			t.Fatal(err)
		}
		errs = append(errs, up.AddBatch(ctx, 0, kvSchema, []arrow.RecordBatch{rec}))
		_, err = s.Guard().Applied(ctx)
		errs = append(errs, err)
		for i, err := range errs {
			if err == nil {
				t.Errorf("call %d succeeded with a wrong password", i)
				continue
			}
			assertNoSecret(t, "error", err.Error(), wrong)
		}
		assertNoSecret(t, "log", logs.String(), wrong)
	})

	t.Run("unreachable server, retried and logged", func(t *testing.T) {
		dsn := withPassword(t, base, wrong, "127.0.0.1:1") // nothing listens on port 1
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var logs lockedBuffer
		s, err := NewOffsetsInSink(pool, "j", "t", WithRetry(3, time.Millisecond, time.Millisecond), WithLogger(newTextLogger(&logs)))
		if err != nil {
			t.Fatal(err)
		}
		err = s.AddBatch(ctx, 0, kvSchema, []arrow.RecordBatch{rec})
		if err == nil {
			t.Fatal("AddBatch to an unreachable server succeeded")
		}
		assertNoSecret(t, "error", err.Error(), wrong)
		assertNoSecret(t, "log", logs.String(), wrong)
		if !strings.Contains(logs.String(), "retrying") {
			t.Errorf("no retry logged: %q", logs.String())
		}
	})

	t.Run("bad DSN", func(t *testing.T) {
		for _, dsn := range []string{
			"postgres://onceflow:" + url.PathEscape(wrong) + "@127.0.0.1:notaport/db",
			"host=127.0.0.1 port=notaport password=" + "'" + wrong + "'",
		} {
			_, err := Connect(context.Background(), dsn)
			if err == nil {
				t.Fatalf("Connect(bad DSN) succeeded")
			}
			assertNoSecret(t, "parse error", err.Error(), wrong)
		}
	})

	t.Run("errors with the right password", func(t *testing.T) {
		real := os.Getenv(testenv.PGEnvVar)
		u, _ := url.Parse(real)
		password, _ := u.User.Password()
		pool := testenv.PG(t)
		if pool.Config().ConnConfig.Password != password {
			t.Fatal("test pool has another password")
		}
		// The password appears in the job name: even then no error shows it.
		s, err := NewOffsetsInSink(pool, "job-"+password, "no such table", WithKeyColumns("k"))
		if err != nil {
			t.Fatal(err)
		}
		for i, err := range []error{
			s.Start(ctx, "q"),
			s.ValidateSchema(kvSchema),
			s.AddBatch(ctx, 0, kvSchema, []arrow.RecordBatch{rec}),
		} {
			if err == nil {
				t.Errorf("call %d succeeded", i)
				continue
			}
			assertNoSecret(t, "error", err.Error(), password)
		}
	})
}
