package storage

import (
	"context"
	"path"
	"path/filepath"
	"strings"
)

// Sub returns a view of s in which every name is relative to prefix (a
// folder such as "state/agg/3"). Closing the view does not close s.
func Sub(s Store, prefix string) Store {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return s
	}
	if p, ok := s.(*prefixed); ok {
		return &prefixed{base: p.base, prefix: p.prefix + prefix + "/"}
	}
	return &prefixed{base: s, prefix: prefix + "/"}
}

type prefixed struct {
	base   Store
	prefix string
}

func (p *prefixed) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return p.base.PutIfAbsent(ctx, p.prefix+name, data)
}

func (p *prefixed) Put(ctx context.Context, name string, data []byte) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return p.base.Put(ctx, p.prefix+name, data)
}

// PutVolatile forwards to the base's PutVolatile (Put when it has none).
func (p *prefixed) PutVolatile(ctx context.Context, name string, data []byte) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return PutVolatile(ctx, p.base, p.prefix+name, data)
}

func (p *prefixed) Get(ctx context.Context, name string) ([]byte, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return p.base.Get(ctx, p.prefix+name)
}

func (p *prefixed) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	infos, err := p.base.List(ctx, p.prefix+prefix)
	if err != nil {
		return nil, err
	}
	for i := range infos {
		infos[i].Name = strings.TrimPrefix(infos[i].Name, p.prefix)
	}
	return infos, nil
}

func (p *prefixed) Delete(ctx context.Context, names ...string) error {
	full := make([]string, len(names))
	for i, n := range names {
		if err := ValidateName(n); err != nil {
			return err
		}
		full[i] = p.prefix + n
	}
	return p.base.Delete(ctx, full...)
}

func (p *prefixed) URL() string {
	return strings.TrimSuffix(p.base.URL(), "/") + "/" + strings.TrimSuffix(p.prefix, "/")
}

func (p *prefixed) Close() error { return nil }

// LocalDir returns the directory a store lives in when it is a Local store,
// a Sub view of one, or a wrapper that keeps its names as they are and
// says what it wraps with an Unwrap() Store method (fault injection,
// instrumentation); false for any other store. Tools use it for things only
// a local directory has, such as a driver's lock file.
func LocalDir(s Store) (string, bool) {
	var prefix string
	for {
		switch v := s.(type) {
		case *Local:
			if prefix == "" {
				return v.Root(), true
			}
			return filepath.Join(v.Root(), filepath.FromSlash(prefix)), true
		case *prefixed:
			s, prefix = v.base, path.Join(strings.TrimSuffix(v.prefix, "/"), prefix)
		case interface{ Unwrap() Store }:
			s = v.Unwrap()
		default:
			return "", false
		}
	}
}
