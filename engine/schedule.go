package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/cron"
)

// ParseSchedule parses a schedule flag: "@every <duration>" (aligned ticks,
// cron.Every) or anything cron.Parse accepts.
func ParseSchedule(spec string, opts ...cron.Option) (Schedule, error) {
	if rest, ok := strings.CutPrefix(strings.TrimSpace(spec), "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: schedule %q: %q is not a positive duration such as 15m", ErrInvalidQuery, spec, strings.TrimSpace(rest))
		}
		return cron.Every(d), nil
	}
	s, err := cron.Parse(spec, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidQuery, err)
	}
	return s, nil
}
