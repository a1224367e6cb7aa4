package files

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/onceflow/onceflow/storage"
)

// deadLetter is one line of a dead-letter file.
type deadLetter struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column string `json:"column,omitempty"`
	Reason string `json:"reason"`
	Raw    string `json:"raw"`
	// Copy names, inside the dead-letter directory, the file holding the
	// bytes of a changed file that no batch read (ChangedName).
	Copy string `json:"copy,omitempty"`
}

// DeadLetterName returns the name, inside the dead-letter directory, of the
// file holding the bad lines of files log entry k.
func DeadLetterName(k int64) string { return fmt.Sprintf("deadletter-%020d.jsonl", k) }

// ChangedName returns the name, inside the dead-letter directory, of the
// file holding the bytes no batch read of the i-th changed file (0-based)
// that files log entry k logged.
func ChangedName(k int64, i int) string { return fmt.Sprintf("deadletter-%020d-%d.changed", k, i) }

// writeDeadLetters replaces entry k's dead-letter file, atomically.
func (s *Source) writeDeadLetters(ctx context.Context, k int64, dead []deadLetter) error {
	store, err := s.deadLetterStore()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range dead {
		if err := enc.Encode(&dead[i]); err != nil {
			return fmt.Errorf("files: encode dead letter: %w", err)
		}
	}
	if err := store.Put(ctx, DeadLetterName(k), buf.Bytes()); err != nil {
		return fmt.Errorf("files: write dead letters of batch %d: %w", k, err)
	}
	return nil
}

func (s *Source) deadLetterStore() (storage.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.dead == nil {
		st, err := storage.OpenLocal(s.cfg.deadLetter, storage.LocalOptions{})
		if err != nil {
			return nil, fmt.Errorf("files: open dead-letter directory: %w", err)
		}
		s.mu.dead = st
	}
	return s.mu.dead, nil
}
