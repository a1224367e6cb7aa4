package main

import (
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
)

func openers() map[string]storage.Opener { return map[string]storage.Opener{"s3": s3store.Open} }
