package sql

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// options are the WITH (key = 'value', …) of a statement, after ${ENV}
// substitution. A value is secret when its key looks like a secret or any
// part of it came from the environment; secrets are never printed.
type options struct {
	c     *compiler
	stmt  string // "source s", "sink k": for errors
	vals  map[string]optVal
	order []string
	used  map[string]bool
}

type optVal struct {
	v      string
	loc    int32
	secret bool
}

var envRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// secretWords mark an option whose value is never printed.
var secretWords = []string{"password", "secret", "token", "sasl", "dsn", "credential", "access_key", "api_key", "private_key"}

// IsSecretOption reports whether an option of this name is treated as a
// secret: its value is never printed in plans, logs or errors.
func IsSecretOption(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

func (c *compiler) options(stmt string, defs []*pg.Node, lookup func(string) (string, bool)) (*options, error) {
	o := &options{c: c, stmt: stmt, vals: map[string]optVal{}, used: map[string]bool{}}
	for _, d := range defs {
		de := d.GetDefElem()
		name := strings.ToLower(de.Defname)
		if de.Defnamespace != "" {
			name = strings.ToLower(de.Defnamespace) + "." + name
		}
		if _, dup := o.vals[name]; dup {
			return nil, c.errAt(de.Location, false, "%s: option %s is given twice", stmt, name)
		}
		var raw string
		switch {
		case de.Arg == nil:
			raw = "true"
		case de.Arg.GetString_() != nil:
			raw = de.Arg.GetString_().Sval
		case de.Arg.GetInteger() != nil:
			raw = strconv.Itoa(int(de.Arg.GetInteger().Ival))
		case de.Arg.GetFloat() != nil:
			raw = de.Arg.GetFloat().Fval
		case de.Arg.GetBoolean() != nil:
			raw = strconv.FormatBool(de.Arg.GetBoolean().Boolval)
		case de.Arg.GetTypeName() != nil:
			raw = typeName(de.Arg.GetTypeName())
		default:
			return nil, c.errAt(de.Location, false, "%s: option %s: write the value as a quoted string", stmt, name)
		}
		secret := IsSecretOption(name)
		var missing string
		v := envRE.ReplaceAllStringFunc(raw, func(m string) string {
			secret = true
			key := envRE.FindStringSubmatch(m)[1]
			val, ok := lookup(key)
			if !ok && missing == "" {
				missing = key
			}
			return val
		})
		if missing != "" {
			return nil, c.errAt(de.Location, false, "%s: option %s: environment variable %s is not set", stmt, name, missing)
		}
		if strings.Contains(v, "@") && strings.Contains(v, "://") {
			// a URL with user information (an Iceberg catalog on
			// postgres://user:password@…) is a secret
			secret = true
		}
		o.vals[name] = optVal{v: v, loc: de.Location, secret: secret}
		o.order = append(o.order, name)
	}
	return o, nil
}

func (o *options) has(k string) bool { _, ok := o.vals[k]; return ok }

func (o *options) str(k, def string) string {
	o.used[k] = true
	if v, ok := o.vals[k]; ok {
		return v.v
	}
	return def
}

func (o *options) required(k, what string) (string, error) {
	o.used[k] = true
	v, ok := o.vals[k]
	if !ok || v.v == "" {
		return "", o.c.errAt(-1, false, "%s: option %s is required (%s)", o.stmt, k, what)
	}
	return v.v, nil
}

func (o *options) errAt(k string, format string, args ...any) error {
	return o.c.errAt(o.vals[k].loc, false, "%s: option %s: "+format, append([]any{o.stmt, k}, args...)...)
}

func (o *options) int64(k string, def int64) (int64, error) {
	o.used[k] = true
	v, ok := o.vals[k]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(v.v, 10, 64)
	if err != nil {
		return 0, o.errAt(k, "%s is not a whole number", o.show(k))
	}
	return n, nil
}

func (o *options) duration(k string, def time.Duration) (time.Duration, error) {
	o.used[k] = true
	v, ok := o.vals[k]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v.v)
	if err != nil {
		if d2, err2 := parseInterval(v.v); err2 == nil {
			return d2, nil
		}
		return 0, o.errAt(k, "%s is not a duration such as 10s or '10 seconds'", o.show(k))
	}
	return d, nil
}

func (o *options) bool(k string, def bool) (bool, error) {
	o.used[k] = true
	v, ok := o.vals[k]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v.v)
	if err != nil {
		return false, o.errAt(k, "%s is not true or false", o.show(k))
	}
	return b, nil
}

func (o *options) list(k string) []string {
	o.used[k] = true
	var out []string
	for _, p := range strings.Split(o.vals[k].v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// show is a value as it may be printed: secrets are masked.
func (o *options) show(k string) string {
	v := o.vals[k]
	if v.secret {
		return "'***'"
	}
	return strconv.Quote(v.v)
}

// unknown fails on an option nothing read, naming the ones that exist.
func (o *options) unknown(known ...string) error {
	for _, k := range o.order {
		if !o.used[k] && !slices.Contains(known, k) {
			var all []string
			for k := range o.used {
				all = append(all, k)
			}
			all = append(all, known...)
			slices.Sort(all)
			return o.c.errAt(o.vals[k].loc, false, "%s: unknown option %s (options here: %s)", o.stmt, k, strings.Join(slices.Compact(all), ", "))
		}
	}
	return nil
}

// String lists the options with secrets masked, for EXPLAIN.
func (o *options) String() string {
	var parts []string
	for _, k := range o.order {
		parts = append(parts, fmt.Sprintf("%s = %s", k, o.show(k)))
	}
	return strings.Join(parts, ", ")
}

func osLookup(k string) (string, bool) { return os.LookupEnv(k) }
