package wire

import (
	"errors"
	"strconv"
	"strings"
)

// Pointer is a parsed RFC 6901 JSON pointer: its reference tokens,
// unescaped ("~1" is "/", "~0" is "~"). The empty pointer "" is the whole
// document. Drill probes and the SDK's shadow verification name required
// fields with it.
type Pointer struct {
	text   string
	tokens []string
}

// ParsePointer parses s as an RFC 6901 JSON pointer.
func ParsePointer(s string) (Pointer, error) {
	p := Pointer{text: s}
	if s == "" {
		return p, nil
	}
	if !strings.HasPrefix(s, "/") {
		return p, errors.New(`is not a JSON pointer: it must be "" or start with "/" (RFC 6901), such as /items/0/id`)
	}
	for _, tok := range strings.Split(s[1:], "/") {
		for i := 0; i < len(tok); i++ {
			if tok[i] == '~' && (i+1 == len(tok) || (tok[i+1] != '0' && tok[i+1] != '1')) {
				return p, errors.New(`is not a JSON pointer: "~" must be followed by 0 or 1 (RFC 6901)`)
			}
		}
		p.tokens = append(p.tokens, strings.NewReplacer("~1", "/", "~0", "~").Replace(tok))
	}
	return p, nil
}

// String returns the pointer as written.
func (p Pointer) String() string { return p.text }

// Resolve reports whether the pointer names a member of doc, a value
// decoded by encoding/json (maps, slices, scalars). A member whose value is
// null exists.
func (p Pointer) Resolve(doc any) bool {
	cur := doc
	for _, tok := range p.tokens {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return false
			}
			cur = next
		case []any:
			// An array index is 0 or digits without a leading zero; "-"
			// (past the end) names nothing that exists.
			if tok == "" || (len(tok) > 1 && tok[0] == '0') {
				return false
			}
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return false
			}
			cur = v[i]
		default:
			return false
		}
	}
	return true
}
