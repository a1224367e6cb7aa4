package pgfault_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/internal/pgfault"
	"github.com/onceflow/onceflow/internal/testenv"
)

// via returns dsn with its host and port replaced by addr.
func via(t *testing.T, dsn, addr, sslmode string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal("bad PostgreSQL URL") // it holds a password: do not print it
	}
	u.Host = addr
	q := u.Query()
	q.Set("sslmode", sslmode)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestLostCommitAnswer checks that an armed proxy lets the COMMIT reach
// the server (the row is there) while the client gets an error, that
// only the armed COMMITs lose their answers, and that simple and extended
// protocol commits both count.
func TestLostCommitAnswer(t *testing.T) {
	dsn := testenv.PGURL(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal("bad PostgreSQL URL")
	}
	p, err := pgfault.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	direct, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	if _, err := direct.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	commit := func(id int, sslmode string, extended bool) error {
		c, err := pgx.Connect(ctx, via(t, dsn, p.Addr(), sslmode))
		if err != nil {
			t.Fatalf("connect through the proxy (sslmode=%s): %v", sslmode, err)
		}
		defer c.Close(ctx)
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", id); err != nil {
			t.Fatal(err)
		}
		if extended { // Parse, Bind, Execute, Sync
			return c.PgConn().ExecParams(ctx, "COMMIT", nil, nil, nil, nil).Read().Err
		}
		return tx.Commit(ctx)
	}
	has := func(id int) bool {
		var n int
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM t WHERE id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if err := commit(1, "disable", false); err != nil || !has(1) {
		t.Fatalf("unarmed commit: %v, row there: %v", err, has(1))
	}
	p.LoseCommits(2, 2)
	cases := []struct {
		id       int
		sslmode  string
		extended bool
		lost     bool
	}{
		{2, "prefer", false, false}, // the 1st from now passes
		{3, "disable", false, true},
		{4, "disable", true, true},
		{5, "prefer", true, false},
	}
	for _, c := range cases {
		err := commit(c.id, c.sslmode, c.extended)
		if c.lost && err == nil {
			t.Errorf("commit %d: the client got an answer, want a lost one", c.id)
		}
		if !c.lost && err != nil {
			t.Errorf("commit %d: %v", c.id, err)
		}
		if !has(c.id) {
			t.Errorf("commit %d: the row is not in the table: the COMMIT did not reach the server", c.id)
		}
	}
	if p.Lost() != 2 || p.Commits() != 5 {
		t.Errorf("%d answers lost of %d commits, want 2 of 5", p.Lost(), p.Commits())
	}
}
