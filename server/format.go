package server

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// ShortDuration writes d the way people write durations, without zero
// units: "72h", "1h30m", "5m", "42s" (wire.FormatDuration). Every
// duration the API answers is in this form.
func ShortDuration(d time.Duration) string { return wire.FormatDuration(d) }

// CanonicalDuration is a duration as stored (as a person wrote it: "7d",
// "90m", "1h0m0s") in the form the API answers: ShortDuration of its
// value ("168h", "1h30m", "1h"). What does not parse is returned as it is.
func CanonicalDuration(s string) string {
	if s == "" {
		return s
	}
	d, err := ParseDuration(s)
	if err != nil {
		return s
	}
	return ShortDuration(d)
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
