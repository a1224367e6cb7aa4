package storage

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Store is a flat namespace of immutable-by-convention objects addressed by
// slash-separated relative names ("offsets/00000000000000000042").
//
// Every method is safe for concurrent use. Names never begin or end with a
// slash, never contain "." or ".." elements, and never end in ".tmp" (that
// suffix is reserved for the local backend's temporary files).
type Store interface {
	// PutIfAbsent creates name with data, atomically and durably, only if
	// no object of that name exists. It returns an error wrapping ErrExist
	// when the name is taken (whoever wrote it). Exactly one of any number
	// of concurrent callers for one name succeeds. After an ambiguous
	// failure (a lost answer, retried) the caller whose bytes were stored
	// may get ErrExist too: compare the stored bytes to tell.
	PutIfAbsent(ctx context.Context, name string, data []byte) error
	// Put creates or replaces name with data, atomically and durably: a
	// reader sees the old object or the new one, never a mix.
	Put(ctx context.Context, name string, data []byte) error
	// Get returns the object's bytes, or an error wrapping ErrNotExist.
	Get(ctx context.Context, name string) ([]byte, error)
	// List returns the names that begin with prefix, sorted ascending.
	// A prefix ending in "/" lists a folder recursively; one that does not
	// matches partial elements too ("offsets/000"). A prefix that
	// ValidatePrefix refuses gives an error wrapping ErrBadName.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes the named objects; a missing name is not an error.
	Delete(ctx context.Context, names ...string) error
	// URL returns where the store lives, without any credential, for
	// messages and for tools.
	URL() string
	// Close releases the store's resources.
	Close() error
}

// VolatilePutter is an optional capability of a Store, for objects no
// recovery reads (the engine's progress reports): PutVolatile creates or
// replaces name with data atomically for readers while the machine runs,
// but does not wait for it to be durable, so after a crash the object may
// be the old one, missing, or (on a local disk) empty or cut short. A
// reader of such objects must treat an unreadable one as absent.
type VolatilePutter interface {
	PutVolatile(ctx context.Context, name string, data []byte) error
}

// PutVolatile writes name with s's PutVolatile when s has one, else with
// Put (durable, which is more than asked).
func PutVolatile(ctx context.Context, s Store, name string, data []byte) error {
	if v, ok := s.(VolatilePutter); ok {
		return v.PutVolatile(ctx, name, data)
	}
	return s.Put(ctx, name, data)
}

// ObjectInfo describes one listed object.
type ObjectInfo struct {
	Name    string // relative to the store root
	Size    int64
	ModTime int64 // Unix nanoseconds; 0 when the backend does not know
}

// Opener opens a Store for a URL scheme; the s3 backend registers through
// OpenOptions rather than a package-level registry.
type Opener func(ctx context.Context, u *url.URL) (Store, error)

// Open opens the store a location names: "file:///abs/dir", a plain path
// (relative or absolute), or a URL whose scheme has an opener in openers
// (for example "s3" → s3store.Open). The plain-path and file forms are
// always available.
func Open(ctx context.Context, location string, openers map[string]Opener) (Store, error) {
	if location == "" {
		return nil, fmt.Errorf("storage: empty location")
	}
	if !strings.Contains(location, "://") {
		abs, err := filepath.Abs(location)
		if err != nil {
			return nil, fmt.Errorf("storage: resolve %q: %w", location, err)
		}
		return OpenLocal(abs, LocalOptions{})
	}
	u, err := url.Parse(location)
	if err != nil {
		// url.Error repeats the whole location, credentials included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("storage: parse location %q: %w", Redact(location), err)
	}
	if u.Scheme == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("storage: file URL %q names a host; use file:///absolute/path", Redact(location))
		}
		return OpenLocal(u.Path, LocalOptions{})
	}
	if op, ok := openers[u.Scheme]; ok {
		return op(ctx, u)
	}
	return nil, fmt.Errorf("storage: no backend for scheme %q in %q", u.Scheme, Redact(location))
}

// Redact removes any user information (access keys, passwords) from a URL
// so it can appear in a message. A location that does not parse as a URL
// but looks like one keeps only its scheme.
func Redact(location string) string {
	u, err := url.Parse(location)
	if err != nil {
		if i := strings.Index(location, "://"); i >= 0 {
			return location[:i+3] + "…"
		}
		return location
	}
	if u.User == nil {
		return location
	}
	u.User = nil
	return u.String()
}

// ValidateName reports whether name is a valid object name.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrBadName)
	}
	if strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") {
		return fmt.Errorf("%w: %q begins or ends with a slash", ErrBadName, name)
	}
	if strings.HasSuffix(name, tmpSuffix) {
		return fmt.Errorf("%w: %q ends in the reserved suffix %s", ErrBadName, name, tmpSuffix)
	}
	for _, el := range strings.Split(name, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("%w: %q has an empty, . or .. element", ErrBadName, name)
		}
	}
	if strings.ContainsRune(name, 0) || strings.ContainsRune(name, '\\') {
		return fmt.Errorf("%w: %q contains a NUL or backslash", ErrBadName, name)
	}
	return nil
}

// ValidatePrefix reports whether prefix may be passed to List: empty, or a
// string whose part up to its last slash is a valid name. The part after the
// last slash is free ("offsets/000" lists "offsets/0001" and "offsets/0002").
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if strings.ContainsRune(prefix, 0) || strings.ContainsRune(prefix, '\\') {
		return fmt.Errorf("%w: prefix %q contains a NUL or backslash", ErrBadName, prefix)
	}
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return nil
	}
	folder := prefix[:i]
	if folder == "" || strings.HasPrefix(folder, "/") || strings.HasSuffix(folder, "/") {
		return fmt.Errorf("%w: prefix %q has an empty element", ErrBadName, prefix)
	}
	for _, el := range strings.Split(folder, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("%w: prefix %q has an empty, . or .. element", ErrBadName, prefix)
		}
	}
	return nil
}

// IsExist reports whether err says the object already exists.
func IsExist(err error) bool { return errors.Is(err, ErrExist) }

// IsNotExist reports whether err says the object does not exist.
func IsNotExist(err error) bool { return errors.Is(err, ErrNotExist) }
