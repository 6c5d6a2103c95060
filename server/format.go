package server

import (
	"strings"
	"time"
)

// ShortDuration writes d the way people write durations, without zero
// units: "72h", "1h30m", "5m", "42s". time.Duration's String writes 72h0m0s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
