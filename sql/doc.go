// Package sql is the SQL front end of onceflow: it compiles a file of
// CREATE SOURCE and CREATE SINK … AS SELECT statements into engine queries,
// one per sink, with the same plans, operator ids, guarantees and errors as
// the Go API. It owns the translation only; it runs nothing by itself and
// the engine does not import it.
//
// # Parsing
//
// The text is parsed by PostgreSQL's own grammar (libpg_query through
// github.com/pganalyze/pg_query_go/v6). PostgreSQL has no CREATE SOURCE,
// CREATE SINK or WATERMARK FOR, so a pre-pass driven by PostgreSQL's scanner
// rewrites them into statements it does parse (CREATE TABLE, CREATE VIEW …
// AS, a named CHECK constraint) and keeps a map from every byte of the
// rewritten text back to the user's text: every error names the user's line
// and column. Nothing here is a hand-written parser.
//
// # Compilation, in order
//
//  1. Rewrite, then parse with PostgreSQL's grammar.
//  2. CREATE SOURCE: columns and types, the watermark, the WITH options
//     after ${ENV} substitution (an unset variable is an error).
//  3. CREATE SINK: the SELECT becomes steps on engine.Stream: WithWatermark
//     (from the source), Where, GroupBy/GroupByWindow + Agg, Where (HAVING),
//     WithBatchIDColumn (batch_id()), Select, DropDuplicates (DISTINCT),
//     GroupBy + Top (RANK() OVER … filtered by WHERE rank <= N). A
//     subquery in FROM adds its steps first, so a query may chain several
//     stateful operators where the engine allows it.
//  4. Each sink's plan is checked by engine.NewQuery over a stand-in source
//     of the declared schema; when the engine refuses it, the first step
//     whose prefix it refuses names the line and column (a projection is
//     checked column by column).
//
// Compile connects to nothing; Open opens the source, the sink and the
// checkpoint of one sink's query.
//
// # Operator ids
//
// A stateful operator's id names its state folder. It is the hint
// /*+ id('name') */ written right after the SELECT keyword of its query
// block, or else <sink>-<kind>-<n>, where kind is aggregate, window,
// session, dedup or top and n counts the sink's stateful operators from the
// source. The rule does not depend on the text, so editing stateless parts
// of a query (a filter, a projection) keeps its state.
//
// # Secrets
//
// An option whose name contains password, secret, token, sasl, dsn,
// credential, access_key, api_key or private_key, and any option whose value
// used ${ENV}, is printed as '***' in EXPLAIN and in errors.
//
// # Concurrency
//
// A Program is immutable after Compile and safe for concurrent use; each
// Query it opens is an engine.Query with that type's rules.
package sql
