package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// decodeSwitch parses and validates a published switch value exactly like
// wire.DecodeSwitch. Values in the canonical layout json.Marshal produces
// for wire.Switch (the console's and the disk snapshot's) take a
// reflection-free fast path; anything else goes through encoding/json.
// FuzzDecodeSwitchValue checks both paths agree.
func decodeSwitch(data []byte) (*wire.Switch, error) {
	sw, ok := parseCanonicalSwitch(data)
	if !ok {
		return wire.DecodeSwitch(data)
	}
	if err := sw.Validate(); err != nil {
		return nil, fmt.Errorf("wire: switch: %w", err)
	}
	return sw, nil
}

// canon is a cursor over a canonical JSON object.
type canon struct {
	b  []byte
	ok bool
}

// lit consumes an optional literal and reports whether it was there.
func (p *canon) lit(s string) bool {
	if p.ok && bytes.HasPrefix(p.b, []byte(s)) {
		p.b = p.b[len(s):]
		return true
	}
	return false
}

// must consumes a literal the canonical layout always has; without it the
// input is not canonical.
func (p *canon) must(s string) {
	if !p.lit(s) {
		p.ok = false
	}
}

// str reads a JSON string without escapes, control or non-ASCII bytes
// (those take the slow path, which handles them).
func (p *canon) str() string {
	if !p.ok || len(p.b) == 0 || p.b[0] != '"' {
		p.ok = false
		return ""
	}
	for i := 1; i < len(p.b); i++ {
		switch c := p.b[i]; {
		case c == '"':
			s := string(p.b[1:i])
			p.b = p.b[i+1:]
			return s
		case c == '\\' || c < 0x20 || c >= 0x80:
			p.ok = false
			return ""
		}
	}
	p.ok = false
	return ""
}

// rawStr returns a string token including its quotes.
func (p *canon) rawStr() []byte {
	start := p.b
	p.str()
	if !p.ok {
		return nil
	}
	return start[:len(start)-len(p.b)]
}

func (p *canon) number() []byte {
	i := 0
	for i < len(p.b) && (p.b[i] >= '0' && p.b[i] <= '9' || p.b[i] == '-' || p.b[i] == '+' || p.b[i] == '.' || p.b[i] == 'e' || p.b[i] == 'E') {
		i++
	}
	if !p.ok || i == 0 || !json.Valid(p.b[:i]) { // JSON's number grammar, not strconv's
		p.ok = false
		return nil
	}
	n := p.b[:i]
	p.b = p.b[i:]
	return n
}

// value skips one JSON object or array (for the fallback payload) and
// returns it; strings inside may hold escapes. Validate checks it is
// valid JSON.
func (p *canon) value() []byte {
	if !p.ok || len(p.b) == 0 || (p.b[0] != '{' && p.b[0] != '[') {
		p.ok = false
		return nil
	}
	depth, inStr := 0, false
	for i := 0; i < len(p.b); i++ {
		c := p.b[i]
		if inStr {
			switch {
			case c == '\\':
				i++
			case c == '"':
				inStr = false
			case c >= 0x80 || c < 0x20:
				p.ok = false
				return nil
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				v := p.b[: i+1 : i+1]
				p.b = p.b[i+1:]
				return v
			}
		}
	}
	p.ok = false
	return nil
}

// parseCanonicalSwitch parses
//
//	{"app":…,"name":…,"level":…,"state":…,"rollout":{"percent":…[,"stickiness":…][,"selector":…]}
//	 [,"fallback":{…}|[…]][,"max_staleness":…][,"warm_up":…],"version":…[,"expires_at":…]}
//
// and nothing else; ok is false for any other input.
func parseCanonicalSwitch(data []byte) (sw *wire.Switch, ok bool) {
	p := canon{b: data, ok: true}
	s := &wire.Switch{}
	p.must(`{"app":`)
	s.App = p.str()
	p.must(`,"name":`)
	s.Name = p.str()
	p.must(`,"level":`)
	s.Level = wire.Level(p.str())
	p.must(`,"state":`)
	s.State = p.str()
	p.must(`,"rollout":{"percent":`)
	pct, err := strconv.ParseFloat(string(p.number()), 64)
	if err != nil {
		return nil, false
	}
	s.Rollout.Percent = pct
	if p.lit(`,"stickiness":`) {
		s.Rollout.Stickiness = p.str()
	}
	if p.lit(`,"selector":`) {
		s.Rollout.Selector = p.str()
	}
	p.must(`}`)
	if p.lit(`,"fallback":`) {
		s.Fallback = json.RawMessage(bytes.Clone(p.value()))
	}
	if p.lit(`,"max_staleness":`) {
		if raw := p.rawStr(); p.ok && s.MaxStaleness.UnmarshalJSON(raw) != nil {
			return nil, false
		}
	}
	if p.lit(`,"warm_up":`) {
		if raw := p.rawStr(); p.ok && s.WarmUp.UnmarshalJSON(raw) != nil {
			return nil, false
		}
	}
	p.must(`,"version":`)
	v, err := strconv.ParseInt(string(p.number()), 10, 64)
	if err != nil {
		return nil, false
	}
	s.Version = v
	if p.lit(`,"expires_at":`) {
		var t time.Time
		if raw := p.rawStr(); !p.ok || t.UnmarshalJSON(raw) != nil {
			return nil, false
		}
		s.ExpiresAt = &t
	}
	if !p.lit(`}`) || len(p.b) != 0 {
		return nil, false
	}
	return s, true
}
