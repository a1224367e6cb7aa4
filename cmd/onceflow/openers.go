package main

import "github.com/onceflow/onceflow/storage"

// storageOpeners lists the URL schemes beyond file paths.
func storageOpeners() map[string]storage.Opener {
	return map[string]storage.Opener{}
}
