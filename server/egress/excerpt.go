package egress

import (
	"errors"
	"net/url"
	"unicode/utf8"

	"github.com/switchyard-io/switchyard/internal/oneline"
)

// MaxExcerpt bounds what of an answer's body the console keeps.
const MaxExcerpt = 1 << 10

// Excerpt is what the console keeps of an answer's body: at most n bytes
// (MaxExcerpt when n is 0 or larger), valid UTF-8, control characters
// (newlines included) replaced by spaces, so a stored excerpt can neither
// hide text from a reader nor break the layout it is shown in.
func Excerpt(body []byte, n int) string {
	if n <= 0 || n > MaxExcerpt {
		n = MaxExcerpt
	}
	cut := len(body) > n
	if cut {
		body = body[:n]
		for len(body) > 0 && !utf8.Valid(body) { // do not split a rune
			body = body[:len(body)-1]
		}
	}
	s := oneline.Clean(string(body), 0)
	if cut {
		s += "…"
	}
	return s
}

// RedactQuery drops a URL's query string and user info (where tokens
// travel) for readers who may not change what the URL belongs to:
// "https://api.example/v1/x?…".
func RedactQuery(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "…"
	}
	if u.User != nil {
		u.User = url.User("…")
	}
	hasQuery := u.RawQuery != "" || u.ForceQuery
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	out := u.String()
	if hasQuery {
		out += "?…"
	}
	return out
}

// Reason is a transport error as the console records it: without the
// method and URL Go puts in front (the URL may carry a token), a refusal
// kept whole.
func Reason(err error) string {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
