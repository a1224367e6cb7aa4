package faultstore

import (
	"context"
	"errors"

	"github.com/onceflow/onceflow/storage"
)

// Store is a storage.Store that passes every call to an inner store unless
// its injector picks the call for a fault.
type Store struct {
	inner storage.Store
	in    *Injector
}

var _ storage.Store = (*Store)(nil)

// Wrap returns inner with in's faults on its calls. A nil injector injects
// nothing.
func Wrap(inner storage.Store, in *Injector) *Store { return &Store{inner: inner, in: in} }

// Unwrap returns the inner store (storage.LocalDir looks through it, so a
// wrapped local checkpoint keeps its lock).
func (s *Store) Unwrap() storage.Store { return s.inner }

// Injector returns the store's injector.
func (s *Store) Injector() *Injector { return s.in }

// write runs a PutIfAbsent or Put under the injector.
func (s *Store) write(ctx context.Context, op Op, name string, data []byte, do func(context.Context, string, []byte) error) error {
	d, ok := s.in.decide(op, name, len(data))
	if !ok {
		return do(ctx, name, data)
	}
	switch d.ev.Fault {
	case Slow:
		if err := d.wait(ctx); err != nil {
			return err
		}
		return do(ctx, name, data)
	case Torn:
		// The inner store takes the cut bytes as the whole object.
		return errors.Join(d.err(), do(ctx, name, data[:d.keep]))
	case SyncFail:
		if err := do(ctx, name, data); err != nil {
			return err
		}
	}
	return d.err()
}

// PutIfAbsent implements storage.Store.
func (s *Store) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	return s.write(ctx, OpPutIfAbsent, name, data, s.inner.PutIfAbsent)
}

// Put implements storage.Store.
func (s *Store) Put(ctx context.Context, name string, data []byte) error {
	return s.write(ctx, OpPut, name, data, s.inner.Put)
}

// Get implements storage.Store.
func (s *Store) Get(ctx context.Context, name string) ([]byte, error) {
	if d, ok := s.in.decide(OpGet, name, 0); ok {
		if d.ev.Fault != Slow {
			return nil, d.err()
		}
		if err := d.wait(ctx); err != nil {
			return nil, err
		}
	}
	return s.inner.Get(ctx, name)
}

// List implements storage.Store. Rules match the prefix as the name.
func (s *Store) List(ctx context.Context, prefix string) ([]storage.ObjectInfo, error) {
	if d, ok := s.in.decide(OpList, prefix, 0); ok {
		if d.ev.Fault != Slow {
			return nil, d.err()
		}
		if err := d.wait(ctx); err != nil {
			return nil, err
		}
	}
	return s.inner.List(ctx, prefix)
}

// Delete implements storage.Store. The injector decides per name: a name
// that gets ENOSPC or EIO is left in place, the others are deleted, and
// the call reports the faults.
func (s *Store) Delete(ctx context.Context, names ...string) error {
	var del []string
	var errs, after []error
	for _, n := range names {
		d, ok := s.in.decide(OpDelete, n, 0)
		switch {
		case !ok:
			del = append(del, n)
		case d.ev.Fault == Slow:
			if err := d.wait(ctx); err != nil {
				return err
			}
			del = append(del, n)
		case d.ev.Fault == SyncFail:
			del = append(del, n)
			after = append(after, d.err())
		default:
			errs = append(errs, d.err())
		}
	}
	if len(del) > 0 {
		if err := s.inner.Delete(ctx, del...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, after...)...)
}

// URL implements storage.Store: the inner store's.
func (s *Store) URL() string { return s.inner.URL() }

// Close implements storage.Store: it closes the inner store.
func (s *Store) Close() error { return s.inner.Close() }
