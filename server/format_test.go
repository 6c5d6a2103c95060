package server

import (
	"testing"
	"time"
)

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		72 * time.Hour:                   "72h",
		90 * time.Minute:                 "1h30m",
		5 * time.Minute:                  "5m",
		42 * time.Second:                 "42s",
		time.Hour + 30*time.Second:       "1h0m30s",
		1500 * time.Millisecond:          "1.5s",
		0:                                "0s",
		2*time.Hour + 10*time.Minute + 0: "2h10m",
	} {
		if got := ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
