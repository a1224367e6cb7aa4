package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PGEnvVar names the environment variable holding the URL of the PostgreSQL
// database the tests may use (scripts/pg-setup.sh prints it).
const PGEnvVar = "ONCEFLOW_TEST_PG_URL"

const pgHowTo = "PostgreSQL tests need a database: run scripts/pg-setup.sh as root and export " +
	PGEnvVar + " as it prints"

// PGURL returns a URL for a fresh schema of its own in the test database:
// the schema is created now, set as the connection's search_path through the
// URL, and dropped with everything in it when the test ends. It skips the
// test when ONCEFLOW_TEST_PG_URL is unset.
func PGURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(PGEnvVar)
	if base == "" {
		SkipMissing(t, pgHowTo)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s is not a URL", PGEnvVar) // the URL holds a password: do not print it
	}
	schema := pgSchemaName(t.Name())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", PGEnvVar, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})

	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// PG returns a pool on a fresh schema of its own (see PGURL), closed when the
// test ends. It skips the test when ONCEFLOW_TEST_PG_URL is unset.
func PG(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := PGURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		t.Fatalf("ping: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// pgSchemaName derives a schema name from the test name plus a random
// suffix, so runs never collide (a name a person can trace back to its test).
func pgSchemaName(test string) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(test) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	b.WriteByte('_')
	b.WriteString(hex.EncodeToString(suffix[:]))
	return b.String()
}
