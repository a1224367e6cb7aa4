package kafka

// SetBeforeDeadLetterCommit sets a function run between producing the
// dead letters of a Read and committing their transaction (tests only).
func SetBeforeDeadLetterCommit(s *Source, f func()) {
	s.dl.Lock()
	s.dl.beforeCommit = f
	s.dl.Unlock()
}
