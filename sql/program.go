package sql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	pg "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

// Option configures Compile and Open.
type Option func(*config)

type config struct {
	file       string
	lookup     func(string) (string, bool)
	root       string
	trigger    *engine.Trigger
	openers    map[string]storage.Opener
	logger     *slog.Logger
	sink       engine.Sink
	engineOpts []engine.Option
	out        io.Writer
}

// WithFile names the SQL file in errors (file:line:col). Default: errors
// say "line L:C".
func WithFile(name string) Option { return func(c *config) { c.file = name } }

// WithEnv is how ${NAME} in a WITH option is looked up. Default:
// os.LookupEnv. A variable that is not set fails the compilation.
func WithEnv(lookup func(name string) (string, bool)) Option {
	return func(c *config) { c.lookup = lookup }
}

// WithCheckpointRoot is the location (a directory, file:// or s3:// URL)
// under which each sink without a checkpoint option keeps its checkpoint,
// in a folder named after the sink. Default: none, and a sink without a
// checkpoint option fails to open.
func WithCheckpointRoot(location string) Option { return func(c *config) { c.root = location } }

// WithTrigger overrides the trigger option of every sink (a test runs
// AvailableNow). Default: each sink's trigger option, or engine.Every(0).
func WithTrigger(t engine.Trigger) Option { return func(c *config) { c.trigger = &t } }

// WithStorageOpeners adds URL schemes (s3://) for checkpoint and file
// locations; see storage.Open. Default: local paths and file:// only.
func WithStorageOpeners(m map[string]storage.Opener) Option {
	return func(c *config) { c.openers = m }
}

// WithLogger passes a logger to the engine and the connectors. Default:
// discard.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithSink replaces the connector of the sink being opened by a program's
// own engine.Sink (Open only). The query, its output mode and trigger stay
// those of the SQL.
func WithSink(s engine.Sink) Option { return func(c *config) { c.sink = s } }

// WithOutput is where a console sink prints. Default: os.Stdout.
func WithOutput(w io.Writer) Option { return func(c *config) { c.out = w } }

// WithEngineOptions adds engine options to the query Open builds (listeners,
// a clock, a status server), after those the SQL sets.
func WithEngineOptions(opts ...engine.Option) Option {
	return func(c *config) { c.engineOpts = append(c.engineOpts, opts...) }
}

// Program is a compiled SQL file: its sources and its sinks, each sink one
// streaming query. It is immutable and safe for concurrent use.
type Program struct {
	cfg     config
	r       *rewritten
	sources map[string]*sourceDef
	sinks   []*Sink
}

// Sink is a CREATE SINK statement compiled to a query plan.
type Sink struct {
	Name       string
	Connector  string
	Mode       engine.OutputMode
	Trigger    engine.Trigger
	Checkpoint string // the checkpoint option, or "" for <root>/<name>
	Partitions int
	// Operators are the query's stateful operators, from the source on.
	Operators []Operator
	Line, Col int
	at        int
	opts      *options
	// engine is the engine's own description of the plan (emits, event
	// time, warnings), over the stand-in source.
	engine engine.Plan
	// retain and snapshotEvery are the engine's WithMinBatchesToRetain
	// and WithSnapshotEvery.
	retain, snapshotEvery int64
	q                     *compiled
}

// Sinks lists the sinks in the order of the file.
func (p *Program) Sinks() []*Sink { return slices.Clone(p.sinks) }

// Sink is the sink of that name, or nil.
func (p *Program) Sink(name string) *Sink {
	for _, s := range p.sinks {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Compile parses a SQL file with PostgreSQL's grammar and compiles each
// CREATE SINK … AS SELECT into an engine query plan, checked by the engine
// against the sources' declared schemas. It connects to nothing. Every
// error is an *Error naming the line and column.
func Compile(text string, opts ...Option) (*Program, error) {
	cfg := config{lookup: osLookup, logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := rewrite(text)
	if err != nil {
		return nil, withFile(err, cfg.file)
	}
	tree, err := pg.Parse(r.text)
	if err != nil {
		loc := -1
		var perr *parser.Error
		if errors.As(err, &perr) && perr.Cursorpos > 0 {
			loc = charToByte(r.text, perr.Cursorpos-1)
		}
		c := &compiler{r: r, file: cfg.file}
		return nil, c.errAt(int32(loc), false, "syntax: %s", err.Error())
	}
	c := &compiler{r: r, file: cfg.file, sources: map[string]*sourceDef{}, ids: map[string]int{}}
	p := &Program{cfg: cfg, r: r, sources: c.sources}
	sinkNames := map[string]bool{}
	for _, raw := range tree.Stmts {
		st := raw.Stmt
		switch {
		case st.GetCreateStmt() != nil:
			cs := st.GetCreateStmt()
			table := !r.sources[r.orig(int(cs.Relation.Location))]
			src, err := c.createSource(cs, cfg.lookup, table)
			if err != nil {
				return nil, err
			}
			if _, dup := c.sources[src.name]; dup {
				return nil, c.errAt(cs.Relation.Location, false, "source or table %s is created twice", src.name)
			}
			c.sources[src.name] = src
		case st.GetViewStmt() != nil:
			vs := st.GetViewStmt()
			if !r.sinks[r.orig(int(vs.View.Location))] {
				return nil, c.errAt(vs.View.Location, true, "CREATE VIEW is not supported: write CREATE SINK name WITH (connector = …) AS SELECT …")
			}
			s, err := c.createSink(vs, cfg)
			if err != nil {
				return nil, err
			}
			if sinkNames[s.Name] {
				return nil, c.errAt(vs.View.Location, false, "sink %s is created twice", s.Name)
			}
			sinkNames[s.Name] = true
			p.sinks = append(p.sinks, s)
		default:
			return nil, c.errAt(raw.StmtLocation, true, "only CREATE SOURCE and CREATE SINK … AS SELECT statements are supported")
		}
	}
	if len(p.sinks) == 0 {
		return nil, &Error{File: cfg.file, Line: 1, Col: 1, Msg: "no CREATE SINK statement: a query runs for each sink"}
	}
	for _, s := range p.sinks {
		if err := c.validate(s); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func withFile(err error, file string) error {
	var e *Error
	if errors.As(err, &e) {
		e.File = file
	}
	return err
}

func (c *compiler) createSource(cs *pg.CreateStmt, lookup func(string) (string, bool), table bool) (*sourceDef, error) {
	name := cs.Relation.Relname
	src := &sourceDef{name: name, at: c.userAt(cs.Relation.Location), table: table}
	var fields []arrow.Field
	for _, e := range cs.TableElts {
		switch {
		case e.GetColumnDef() != nil:
			cd := e.GetColumnDef()
			t, ok := sqlType(cd.TypeName)
			if !ok {
				return nil, c.errAt(cd.TypeName.Location, true, "column %s: type %s is not supported: the types are %s", cd.Colname, typeName(cd.TypeName), supportedTypes)
			}
			nullable := true
			for _, k := range cd.Constraints {
				con := k.GetConstraint()
				switch con.Contype {
				case pg.ConstrType_CONSTR_NOTNULL:
					nullable = false
				case pg.ConstrType_CONSTR_NULL:
				default:
					return nil, c.errAt(con.Location, true, "column %s: only NOT NULL is supported as a column constraint", cd.Colname)
				}
			}
			for _, f := range fields {
				if f.Name == cd.Colname {
					return nil, c.errAt(cd.Location, false, "column %s is declared twice", cd.Colname)
				}
			}
			fields = append(fields, arrow.Field{Name: cd.Colname, Type: t, Nullable: nullable})
		case e.GetConstraint() != nil:
			con := e.GetConstraint()
			if con.Contype == pg.ConstrType_CONSTR_CHECK && con.Conname == watermarkConstraint {
				if src.wm != nil {
					return nil, c.errAt(con.Location, false, "a second WATERMARK FOR: a source has one event-time column")
				}
				wm, err := c.watermark(con.RawExpr, fields)
				if err != nil {
					return nil, err
				}
				src.wm = wm
				continue
			}
			if con.Contype == pg.ConstrType_CONSTR_PRIMARY {
				if !table {
					return nil, c.errAt(con.Location, true, "PRIMARY KEY in CREATE SOURCE: a changelog table keyed by its primary key is CREATE TABLE name (…, PRIMARY KEY (k)) WITH (…)")
				}
				if src.keys != nil {
					return nil, c.errAt(con.Location, false, "a second PRIMARY KEY")
				}
				for _, k := range con.Keys {
					kn := k.GetString_().GetSval()
					if !slices.ContainsFunc(fields, func(f arrow.Field) bool { return f.Name == kn }) {
						return nil, c.errAt(con.Location, false, "PRIMARY KEY (%s): no such column (declare the columns before the key)", kn)
					}
					src.keys = append(src.keys, kn)
				}
				continue
			}
			return nil, c.errAt(con.Location, true, "table constraints are not supported in CREATE SOURCE; the one clause besides columns is WATERMARK FOR col AS col - INTERVAL '…'")
		}
	}
	opts, err := c.options("source "+name, cs.Options, lookup)
	if err != nil {
		return nil, err
	}
	src.opts = opts
	src.connector = opts.str("connector", "")
	if table {
		if src.keys == nil {
			return nil, c.errAt(cs.Relation.Location, true, "CREATE TABLE %s without PRIMARY KEY: a table is a changelog keyed by its primary key, CREATE TABLE name (…, PRIMARY KEY (k)) WITH (connector = 'kafka', …); a stream is CREATE SOURCE", name)
		}
		if src.connector == "rate" {
			return nil, c.errAt(opts.vals["connector"].loc, true, "table %s: connector rate is not a changelog; a table reads kafka (a compacted topic) or files", name)
		}
		for _, f := range fields {
			src.declared = append(src.declared, f.Name)
		}
		if src.connector == "kafka" {
			tomb, err := opts.bool("tombstones", false)
			if err != nil {
				return nil, err
			}
			src.tombstones = tomb
			if tomb && len(src.keys) == 1 {
				for _, f := range fields {
					if f.Name == src.keys[0] && f.Type.ID() != arrow.STRING {
						return nil, opts.errAt("tombstones", "a tombstone's key is the record key, text: declare %s text", f.Name)
					}
				}
			}
			if tomb {
				src.deleteWhen = tableDelete(src.declared, src.keys)
				if src.deleteWhen == nil {
					return nil, opts.errAt("tombstones", "table %s has no column besides its key: a tombstone is a row whose other columns are null", name)
				}
				for i := range fields {
					fields[i].Nullable = true
				}
			}
		}
		if opts.has("delete_when_null") {
			col := opts.str("delete_when_null", "")
			if !slices.Contains(src.declared, col) {
				return nil, opts.errAt("delete_when_null", "%q is not a column of table %s", col, name)
			}
			src.deleteWhen = batch.IsNull(batch.Col(col))
		}
	} else if opts.has("tombstones") || opts.has("delete_when_null") {
		k := "tombstones"
		if !opts.has(k) {
			k = "delete_when_null"
		}
		return nil, opts.errAt(k, "only a CREATE TABLE … PRIMARY KEY (a changelog) deletes rows")
	}
	schema, err := c.sourceSchema(src, fields)
	if err != nil {
		return nil, err
	}
	src.schema = schema
	if src.wm != nil && schema.FieldIndices(src.wm.col) == nil {
		return nil, c.errAt(int32(-1), false, "source %s: watermark column %s is not a column", name, src.wm.col)
	}
	return src, nil
}

func (c *compiler) watermark(n *pg.Node, fields []arrow.Field) (*wmDef, error) {
	ae := n.GetAExpr()
	col := ae.Lexpr.GetColumnRef()
	if col == nil {
		return nil, c.errAt(exprLoc(n), false, "WATERMARK FOR takes a column name")
	}
	name := col.Fields[len(col.Fields)-1].GetString_().GetSval()
	found := false
	for _, f := range fields {
		if f.Name == name {
			found = true
			if f.Type.ID() != arrow.TIMESTAMP {
				return nil, c.errAt(col.Location, false, "WATERMARK FOR %s: the column is %s, not a timestamp", name, f.Type)
			}
		}
	}
	if !found {
		return nil, c.errAt(col.Location, false, "WATERMARK FOR %s: no such column (declare the columns before the watermark)", name)
	}
	wm := &wmDef{col: name}
	r := ae.Rexpr
	if cr := r.GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetString_().GetSval() == name {
		return wm, nil
	}
	sub := r.GetAExpr()
	if sub == nil || len(sub.Name) != 1 || sub.Name[0].GetString_().GetSval() != "-" || sub.Lexpr.GetColumnRef() == nil ||
		sub.Lexpr.GetColumnRef().Fields[len(sub.Lexpr.GetColumnRef().Fields)-1].GetString_().GetSval() != name {
		return nil, c.errAt(exprLoc(r), true, "the watermark expression must be %s - INTERVAL '…' (or %s)", name, name)
	}
	d, err := c.interval(sub.Rexpr)
	if err != nil {
		return nil, err
	}
	wm.delay = d
	return wm, nil
}

func (c *compiler) createSink(vs *pg.ViewStmt, cfg config) (*Sink, error) {
	name := vs.View.Relname
	l, col := c.r.pos(int(vs.View.Location))
	s := &Sink{Name: name, Line: l, Col: col, at: c.userAt(vs.View.Location)}
	if len(vs.Aliases) > 0 {
		return nil, c.errAt(vs.View.Location, true, "a column list after the sink name is not supported: name the columns in the SELECT")
	}
	opts, err := c.options("sink "+name, vs.Options, cfg.lookup)
	if err != nil {
		return nil, err
	}
	s.opts = opts
	s.Connector = opts.str("connector", "")
	if err := checkSinkConnector(c, s); err != nil {
		return nil, err
	}
	s.Mode = engine.Append
	if opts.has("output_mode") {
		m, err := engine.ParseOutputMode(opts.str("output_mode", ""))
		if err != nil {
			return nil, opts.errAt("output_mode", "%s is not append, update or complete", opts.show("output_mode"))
		}
		s.Mode = m
	}
	s.Trigger = engine.Every(0)
	if opts.has("trigger") {
		t, err := engine.ParseTrigger(opts.str("trigger", ""))
		if err != nil {
			return nil, opts.errAt("trigger", "%s is not a trigger: an interval (10s), once or available-now", opts.show("trigger"))
		}
		s.Trigger = t
	}
	if cfg.trigger != nil {
		s.Trigger = *cfg.trigger
	}
	s.Checkpoint = opts.str("checkpoint", "")
	p, err := opts.int64("state_partitions", engine.DefaultStatePartitions)
	if err != nil {
		return nil, err
	}
	s.Partitions = int(p)
	if s.retain, err = opts.int64("min_batches_to_retain", engine.DefaultMinBatchesToRetain); err != nil {
		return nil, err
	}
	if s.snapshotEvery, err = opts.int64("snapshot_every", engine.DefaultSnapshotEvery); err != nil {
		return nil, err
	}
	c.sink, c.nState = name, 0
	sel := vs.Query.GetSelectStmt()
	if sel == nil {
		return nil, c.errAt(vs.View.Location, true, "a sink's query is a SELECT")
	}
	q, err := c.compileSelect(sel, firstTargetLoc(sel, vs.View.Location))
	if err != nil {
		return nil, err
	}
	if q.top != nil {
		return nil, c.errAt(q.top.at, true, "RANK() OVER needs an enclosing SELECT … FROM (…) WHERE %s <= N: the top N rows per group", q.top.rank)
	}
	s.q = q
	for _, o := range q.ops {
		if o.stateful != nil {
			s.Operators = append(s.Operators, *o.stateful)
		}
	}
	if len(s.Operators) == 0 {
		q.ops = slices.DeleteFunc(q.ops, func(o op) bool { return o.watermark })
	}
	if err := checkSinkOptions(c, s); err != nil {
		return nil, err
	}
	return s, nil
}

// stream builds the sink's query over the opened sources (by name).
func (s *Sink) stream(srcs map[string]engine.Source, upto int) *engine.Stream {
	return build(s.q, srcs, upto)
}

func build(q *compiled, srcs map[string]engine.Source, upto int) *engine.Stream {
	st := engine.ReadStream(srcs[q.src.name])
	for _, o := range q.ops[:upto] {
		if o.join != nil {
			st = o.join.build(st, build(o.join.right, srcs, len(o.join.right.ops)))
			continue
		}
		st = o.apply(st)
	}
	return st
}

// validate checks the whole plan with the engine, over a stand-in source
// of the declared schema. When the engine refuses it, the first step whose
// prefix it refuses names the place; a projection is checked column by
// column.
func (c *compiler) validate(s *Sink) error {
	stub := map[string]engine.Source{}
	for _, src := range s.q.srcs {
		stub[src.name] = stubSource{schema: src.schema}
	}
	check := func(st *engine.Stream, modes ...engine.OutputMode) error {
		var first error
		for _, m := range modes {
			_, err := engine.NewQuery(st, engine.WithCheckpoint(nopStore{}), engine.WithSink(memsink.New("validate")), engine.WithOutputMode(m), engine.WithAtLeastOnce())
			if err == nil {
				return nil
			}
			if first == nil {
				first = err
			}
		}
		return first
	}
	full := check(s.stream(stub, len(s.q.ops)), s.Mode)
	if full == nil {
		q, err := engine.NewQuery(s.stream(stub, len(s.q.ops)), engine.WithCheckpoint(nopStore{}), engine.WithSink(memsink.New("validate")),
			engine.WithOutputMode(s.Mode), engine.WithAtLeastOnce(), engine.WithStatePartitions(s.Partitions))
		if err == nil {
			if plan, err := q.Describe(); err == nil {
				s.engine = plan
			}
		}
		return nil
	}
	anyMode := []engine.OutputMode{engine.Append, engine.Update, engine.Complete}
	for k := 1; k <= len(s.q.ops); k++ {
		o := s.q.ops[k-1]
		if err := check(s.stream(stub, k), anyMode...); err != nil {
			at := o.at
			for _, it := range o.items {
				if check(it.apply(s.stream(stub, k-1)), anyMode...) != nil {
					at = it.at
					break
				}
			}
			l, col := c.r.lineCol(at)
			return &Error{File: c.file, Line: l, Col: col, Msg: engineMsg(err)}
		}
	}
	at := s.at
	for _, o := range s.q.ops {
		if o.stateful != nil {
			at = o.at
		}
	}
	l, col := c.r.lineCol(at)
	return &Error{File: c.file, Line: l, Col: col, Msg: fmt.Sprintf("sink %s (output_mode = %s): %s", s.Name, s.Mode, engineMsg(full))}
}

// engineMsg is the engine's reason without its "engine: invalid query:
// step N:" prefix, whose step numbers mean nothing in SQL.
func engineMsg(err error) string {
	m := err.Error()
	m = strings.TrimPrefix(m, engine.ErrInvalidQuery.Error()+": ")
	if strings.HasPrefix(m, "step ") {
		if i := strings.Index(m, ": "); i > 0 {
			m = m[i+2:]
		}
	}
	return m
}

// stubSource stands for a source at planning: it has the declared schema
// and is never read.
type stubSource struct{ schema *arrow.Schema }

func (s stubSource) Schema() *arrow.Schema { return s.schema }
func (stubSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return nil, errors.New("sql: planning stand-in")
}
func (stubSource) LatestOffset(context.Context, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("sql: planning stand-in")
}
func (stubSource) Read(context.Context, json.RawMessage, json.RawMessage, func(arrow.RecordBatch) error) error {
	return errors.New("sql: planning stand-in")
}

// nopStore stands for a checkpoint at planning; engine.NewQuery does not
// touch it.
type nopStore struct{}

var errPlanning = errors.New("sql: planning stand-in")

func (nopStore) PutIfAbsent(context.Context, string, []byte) error          { return errPlanning }
func (nopStore) Put(context.Context, string, []byte) error                  { return errPlanning }
func (nopStore) Get(context.Context, string) ([]byte, error)                { return nil, errPlanning }
func (nopStore) List(context.Context, string) ([]storage.ObjectInfo, error) { return nil, errPlanning }
func (nopStore) Delete(context.Context, ...string) error                    { return errPlanning }
func (nopStore) URL() string                                                { return "planning://" }
func (nopStore) Close() error                                               { return nil }
