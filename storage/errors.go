package storage

import "errors"

var (
	// ErrExist is returned by PutIfAbsent when the name is already taken.
	ErrExist = errors.New("storage: object already exists")
	// ErrNotExist is returned by Get for a missing object.
	ErrNotExist = errors.New("storage: object does not exist")
	// ErrBadName is returned for a name that is not a valid object name.
	ErrBadName = errors.New("storage: bad object name")
)
