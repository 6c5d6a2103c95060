package server

import (
	"fmt"
	"strconv"
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

// ParseDuration reads a duration as people write them: Go's syntax
// ("90m", "1h30m") plus days as the leading unit ("7d", "1.5d", "1d12h";
// a day is 24 h). Every duration the API or the web console takes is read
// with it.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	days, rest, ok := strings.Cut(s, "d")
	if !ok {
		return time.ParseDuration(s)
	}
	bad := fmt.Errorf("time: invalid duration %q", s)
	sign := 1.0
	if t, neg := strings.CutPrefix(days, "-"); neg {
		days, sign = t, -1
	}
	if days == "" || strings.Trim(days, "0123456789.") != "" {
		return 0, bad
	}
	n, err := strconv.ParseFloat(days, 64)
	if err != nil {
		return 0, bad
	}
	d := time.Duration(n * float64(24*time.Hour))
	if rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || strings.ContainsAny(rest[:1], "+-") {
			return 0, bad
		}
		d += r
	}
	return time.Duration(sign) * d, nil
}
