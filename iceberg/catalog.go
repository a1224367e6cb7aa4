package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// file IO
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite", pure Go
)

// Catalog is an Iceberg catalog with the file IO settings its tables use:
// the SQL catalog on SQLite (embedded, the default) or PostgreSQL, or a
// REST catalog. It is safe for concurrent use. Close releases the
// database connection.
type Catalog struct {
	cat       catalog.Catalog
	db        *sql.DB
	desc      string
	warehouse string
	secrets   []string
}

// CatalogOption configures OpenCatalog.
type CatalogOption func(*catalogConfig)

type catalogConfig struct {
	warehouse string
	props     ice.Properties
	s3        *S3Config
}

// S3Config reaches an S3 server for metadata and data under s3://
// locations. Empty fields fall back to the AWS environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION).
type S3Config struct {
	Endpoint        string // e.g. http://127.0.0.1:7070; empty: AWS
	Region          string
	AccessKeyID     string
	SecretAccessKey string
	PathStyle       bool // path-style addressing (MinIO, versitygw)
}

// WithWarehouse sets where new tables are created: a local directory or
// an s3://bucket/prefix location. Default: for an SQLite catalog, the
// directory "warehouse" next to the database file; otherwise required
// when a table is created.
func WithWarehouse(location string) CatalogOption {
	return func(c *catalogConfig) { c.warehouse = location }
}

// WithS3 sets how s3:// locations are reached. Default: the AWS
// environment, virtual-hosted addressing.
func WithS3(cfg S3Config) CatalogOption {
	return func(c *catalogConfig) { v := cfg; c.s3 = &v }
}

// WithCatalogProperties passes Iceberg catalog properties through
// unchanged (REST settings such as "credential", "token", "prefix",
// "rest.sigv4-enabled"; file IO settings such as "s3.endpoint"). Later
// options win over earlier ones. Default: none.
func WithCatalogProperties(props map[string]string) CatalogOption {
	return func(c *catalogConfig) {
		if c.props == nil {
			c.props = ice.Properties{}
		}
		for k, v := range props {
			c.props[k] = v
		}
	}
}

// OpenCatalog opens the catalog uri names:
//
//	sqlite:PATH                   SQL catalog in an SQLite file (created)
//	postgres://… postgresql://…   SQL catalog in PostgreSQL (tables created)
//	rest+http://… rest+https://…  REST catalog at http(s)://…
//
// Credentials in uri and options never appear in errors or descriptions.
func OpenCatalog(ctx context.Context, uri string, opts ...CatalogOption) (*Catalog, error) {
	var cfg catalogConfig
	for _, o := range opts {
		o(&cfg)
	}
	props := ice.Properties{}
	c := &Catalog{}
	if cfg.s3 != nil {
		s := cfg.s3
		ak, sk, region := s.AccessKeyID, s.SecretAccessKey, s.Region
		if ak == "" {
			ak, sk = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
		}
		if region == "" {
			region = os.Getenv("AWS_REGION")
		}
		if region == "" {
			region = "us-east-1"
		}
		props[iceio.S3Region] = region
		if ak != "" {
			props[iceio.S3AccessKeyID] = ak
			props[iceio.S3SecretAccessKey] = sk
			c.secrets = append(c.secrets, ak, sk)
		}
		if s.Endpoint != "" {
			props[iceio.S3EndpointURL] = s.Endpoint
		}
		if s.PathStyle {
			props[iceio.S3ForceVirtualAddressing] = "false"
		}
	}
	for k, v := range cfg.props {
		props[k] = v
		if isSecretProperty(k) {
			c.secrets = append(c.secrets, v)
		}
	}
	switch {
	case strings.HasPrefix(uri, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(uri, "sqlite:"), "//")
		if path == "" {
			return nil, errors.New("iceberg: open catalog: sqlite: needs a file path (sqlite:/path/catalog.db)")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("iceberg: open catalog %s: %w", path, err)
		}
		if cfg.warehouse == "" {
			abs, err := filepath.Abs(filepath.Join(filepath.Dir(path), "warehouse"))
			if err != nil {
				return nil, fmt.Errorf("iceberg: open catalog %s: %w", path, err)
			}
			cfg.warehouse = abs
		}
		// WAL and a busy timeout let a CLI read the catalog while a query
		// commits to it.
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
		if err != nil {
			return nil, fmt.Errorf("iceberg: open catalog %s: %w", path, err)
		}
		c.db, c.desc = db, "sqlite:"+path
		if err := c.openSQL(ctx, sqlcat.SQLite, props, cfg.warehouse); err != nil {
			return nil, err
		}
	case strings.HasPrefix(uri, "postgres://"), strings.HasPrefix(uri, "postgresql://"):
		u, err := url.Parse(uri)
		if err != nil {
			return nil, errors.New("iceberg: open catalog: the PostgreSQL URL does not parse")
		}
		if p, ok := u.User.Password(); ok && p != "" {
			c.secrets = append(c.secrets, p, url.QueryEscape(p))
		}
		db, err := sql.Open("pgx", uri)
		if err != nil {
			return nil, c.scrub(fmt.Errorf("iceberg: open catalog: %w", err))
		}
		c.db, c.desc = db, "postgres://"+u.Host+u.Path
		if err := c.openSQL(ctx, sqlcat.Postgres, props, cfg.warehouse); err != nil {
			return nil, err
		}
	case strings.HasPrefix(uri, "rest+http://"), strings.HasPrefix(uri, "rest+https://"):
		endpoint := strings.TrimPrefix(uri, "rest+")
		u, err := url.Parse(endpoint)
		if err != nil {
			return nil, errors.New("iceberg: open catalog: the REST URL does not parse")
		}
		if cfg.warehouse != "" {
			props["warehouse"] = cfg.warehouse
		}
		var ropts []rest.Option
		ropts = append(ropts, rest.WithAdditionalProps(props))
		if w := cfg.warehouse; w != "" {
			ropts = append(ropts, rest.WithWarehouseLocation(w))
		}
		if cred := props["credential"]; cred != "" {
			ropts = append(ropts, rest.WithCredential(cred))
		}
		if tok := props["token"]; tok != "" {
			ropts = append(ropts, rest.WithOAuthToken(tok))
		}
		rc, err := rest.NewCatalog(ctx, "onceflow", endpoint, ropts...)
		if err != nil {
			return nil, c.scrub(fmt.Errorf("iceberg: open REST catalog %s: %w", u.Host, err))
		}
		c.cat, c.desc = rc, "rest:"+u.Scheme+"://"+u.Host+u.Path
	default:
		return nil, fmt.Errorf("iceberg: open catalog: unknown catalog %q: use sqlite:PATH, postgres://…, or rest+http(s)://…", redactURI(uri))
	}
	c.warehouse = cfg.warehouse
	return c, nil
}

func (c *Catalog) openSQL(ctx context.Context, dialect sqlcat.SupportedDialect, props ice.Properties, warehouse string) error {
	props[sqlcat.DialectKey] = string(dialect)
	if warehouse != "" {
		props["warehouse"] = warehouse
	}
	props["init_catalog_tables"] = "true"
	cat, err := sqlcat.NewCatalog("onceflow", c.db, dialect, props)
	if err != nil {
		_ = c.db.Close()
		return c.scrub(fmt.Errorf("iceberg: open catalog %s: %w", c.desc, err))
	}
	c.cat = cat
	return nil
}

// Description names the catalog without credentials.
func (c *Catalog) Description() string { return c.desc }

// Warehouse is where new tables go ("" when the catalog decides).
func (c *Catalog) Warehouse() string { return c.warehouse }

// Close releases the catalog's connections.
func (c *Catalog) Close() error {
	if c.db != nil {
		return c.db.Close()
	}
	return nil
}

// LoadTable loads the table named "namespace.table" (the namespace may
// have several dotted parts).
func (c *Catalog) LoadTable(ctx context.Context, name string) (*table.Table, error) {
	ident, err := parseIdent(name)
	if err != nil {
		return nil, err
	}
	t, err := c.cat.LoadTable(ctx, ident)
	if err != nil {
		if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
			return nil, fmt.Errorf("iceberg: table %s in %s: %w", name, c.desc, ErrNoTable)
		}
		return nil, c.scrub(fmt.Errorf("iceberg: load table %s from %s: %w", name, c.desc, err))
	}
	return t, nil
}

// ListTables lists the tables of a namespace as "namespace.table".
func (c *Catalog) ListTables(ctx context.Context, namespace string) ([]string, error) {
	var out []string
	for id, err := range c.cat.ListTables(ctx, strings.Split(namespace, ".")) {
		if err != nil {
			if errors.Is(err, catalog.ErrNoSuchNamespace) {
				return nil, nil
			}
			return nil, c.scrub(fmt.Errorf("iceberg: list tables of %s in %s: %w", namespace, c.desc, err))
		}
		out = append(out, strings.Join(id, "."))
	}
	return out, nil
}

// createTable creates the table (and its namespace) unless it exists.
func (c *Catalog) createTable(ctx context.Context, name string, sc *ice.Schema, spec *ice.PartitionSpec, props ice.Properties) (*table.Table, error) {
	ident, err := parseIdent(name)
	if err != nil {
		return nil, err
	}
	ns := catalog.NamespaceFromIdent(ident)
	if err := c.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, c.scrub(fmt.Errorf("iceberg: create namespace %s in %s: %w", strings.Join(ns, "."), c.desc, err))
	}
	opts := []catalog.CreateTableOpt{catalog.WithProperties(props)}
	if spec != nil {
		opts = append(opts, catalog.WithPartitionSpec(spec))
	}
	if c.warehouse != "" {
		opts = append(opts, catalog.WithLocation(strings.TrimSuffix(c.warehouse, "/")+"/"+strings.Join(ident, "/")))
	}
	t, err := c.cat.CreateTable(ctx, ident, sc, opts...)
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		return c.LoadTable(ctx, name)
	}
	if err != nil {
		return nil, c.scrub(fmt.Errorf("iceberg: create table %s in %s: %w", name, c.desc, err))
	}
	return t, nil
}

func parseIdent(name string) (table.Identifier, error) {
	parts := strings.Split(name, ".")
	if len(parts) < 2 || slicesContainsEmpty(parts) {
		return nil, fmt.Errorf("iceberg: table name %q: want namespace.table (e.g. lake.payments)", name)
	}
	return parts, nil
}

func slicesContainsEmpty(parts []string) bool {
	for _, p := range parts {
		if p == "" {
			return true
		}
	}
	return false
}

// scrub returns err with every credential the catalog knows replaced by
// "***", keeping errors.Is and errors.As working on the original.
func (c *Catalog) scrub(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range c.secrets {
		if len(s) >= 4 && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "***")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

func isSecretProperty(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"secret", "password", "token", "credential", "session"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// redactURI drops the user information of a URI for messages.
func redactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.User == nil {
		if strings.Contains(uri, "@") {
			return "(a URI with credentials)"
		}
		return uri
	}
	u.User = nil
	return u.String()
}
