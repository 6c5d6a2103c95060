// Package oneline makes text from outside — a metric source's error, a
// webhook's answer, a person's reason — fit on one line of an audit
// reason, a log line or a page: one cleaner for every domain, so they
// agree on what is kept.
package oneline

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Clean returns s as one line of at most max bytes: invalid UTF-8 becomes
// "?"; control characters (newlines, tabs, escapes, C1 controls), format
// characters (bidirectional overrides, zero-width marks: they can hide or
// reorder what a reader sees) and U+FFFD become spaces; leading and
// trailing space goes; and a longer text is cut at a rune boundary and
// ends with "…" (within max). max ≤ 0 means no bound.
func Clean(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	s = strings.TrimSpace(s)
	return Cut(s, max)
}

// Cut bounds s, already one line, to max bytes: a longer s is cut at a
// rune boundary and ends with "…" (within max). max ≤ 0 means no bound.
func Cut(s string, max int) string {
	const ellipsis = "…"
	if max <= 0 || len(s) <= max {
		return s
	}
	n := max - len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if n < 0 {
		n = 0
	}
	return s[:n] + ellipsis
}
