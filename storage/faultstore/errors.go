package faultstore

import "errors"

// ErrInjected is wrapped by every error the package makes up, so a test
// can tell an injected failure from a real one.
var ErrInjected = errors.New("faultstore: injected fault")
