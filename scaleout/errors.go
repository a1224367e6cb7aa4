package scaleout

import "errors"

// ErrConfig is wrapped by NewWorker's errors: the options are inconsistent.
var ErrConfig = errors.New("scaleout: invalid worker configuration")
