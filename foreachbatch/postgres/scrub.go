package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// scrubber removes the connection password from error text. pgx keeps the
// password out of its own messages as far as we know, but a connection error
// can quote a DSN, a server can echo what it was sent, and the promise here
// is absolute: no error this package returns contains the password, in any
// of the encodings a DSN may use.
type scrubber struct {
	secrets []string
}

const redacted = "xxxxx"

func newScrubber(pool *pgxpool.Pool) scrubber {
	if pool == nil {
		return scrubber{}
	}
	return scrubberFor(pool.Config().ConnConfig.Password)
}

func scrubberFor(password string) scrubber {
	if password == "" {
		return scrubber{}
	}
	s := scrubber{secrets: []string{password}}
	for _, enc := range []string{url.QueryEscape(password), url.PathEscape(password), url.UserPassword("u", password).String()[2:]} {
		if enc != password {
			s.secrets = append(s.secrets, enc)
		}
	}
	return s
}

func (s scrubber) text(msg string) string {
	for _, p := range s.secrets {
		msg = strings.ReplaceAll(msg, p, redacted)
	}
	return msg
}

// err returns err with the password removed from its text. errors.Is and
// errors.As still see the original chain.
func (s scrubber) err(err error) error {
	if err == nil || len(s.secrets) == 0 {
		return err
	}
	msg := err.Error()
	clean := s.text(msg)
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// Connect opens a pool on dsn and checks that it can reach the server. Any
// error it returns has the DSN's password removed.
func Connect(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, scrubDSN(dsn).err(fmt.Errorf("postgres: parse connection string: %w", err))
	}
	scrub := scrubberFor(cfg.ConnConfig.Password)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, scrub.err(fmt.Errorf("postgres: open pool: %w", err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, scrub.err(fmt.Errorf("postgres: connect: %w", err))
	}
	return pool, nil
}

// scrubDSN guesses the password of a DSN that did not parse: the user-info
// password of a URL, or a password=... keyword value.
func scrubDSN(dsn string) scrubber {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			return scrubberFor(p)
		}
	}
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "password="); ok {
			return scrubberFor(strings.Trim(v, "'"))
		}
	}
	// Last resort: hide everything after the scheme's user-info separator.
	if i := strings.Index(dsn, "://"); i >= 0 {
		if j := strings.LastIndexByte(dsn, '@'); j > i {
			return scrubberFor(dsn[i+3 : j])
		}
	}
	return scrubber{}
}
