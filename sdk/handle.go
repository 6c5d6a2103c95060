package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// ErrNoFallback is returned by Handle.Fallback when the switch has no
// fallback payload (or no data at all).
var ErrNoFallback = errors.New("sdk: switch has no fallback value")

// Option configures a Handle.
type Option func(*handleOptions)

type handleOptions struct {
	def    bool
	defSet bool
}

// Default sets the answer of On when neither live data, the disk snapshot
// nor the environment has a value for the switch. Without it the answer
// is off.
func Default(on bool) Option {
	return func(o *handleOptions) { o.def, o.defSet = on, true }
}

// Handle is a resolved switch. Keep it and call On on the hot path: it
// stays valid across updates and costs one atomic load.
type Handle struct {
	c        *Client
	st       *statePtr
	p        *unsafe.Pointer // &st.p, read directly by On to stay inlinable
	idx      int             // index into state.entries; always in range (see coverLocked)
	read     *uint32         // &sig.read, read directly by On to stay inlinable
	fbOn     bool            // environment, else Default, else off
	fbSource Source          // SourceEnv, SourceDefault or SourceNone
	name     string
	sig      *switchSignals // the name's signals, shared by its handles
}

// Switch returns the handle of the named switch. It never fails: an
// unknown name answers from the environment, the Default option or off
// until the switch is published.
func (c *Client) Switch(name string, opts ...Option) *Handle {
	var o handleOptions
	for _, opt := range opts {
		opt(&o)
	}
	h := &Handle{c: c, st: &c.state, p: &c.state.p, name: name}
	switch env, ok := c.env[envName(name)]; {
	case ok:
		h.fbOn, h.fbSource = env, SourceEnv
	case o.defSet:
		h.fbOn, h.fbSource = o.def, SourceDefault
	}
	c.mu.Lock()
	h.idx = int(c.indexLocked(name))
	c.coverLocked()
	h.sig = c.sigs[h.idx]
	h.read = &h.sig.read
	c.mu.Unlock()
	return h
}

// Name returns the switch name.
func (h *Handle) Name() string { return h.name }

func (h *Handle) entry() *entry {
	s := h.st.Load()
	if h.idx < len(s.entries) {
		if e := &s.entries[h.idx]; e.sw != nil {
			return e
		}
	}
	return nil
}

// On reports whether the switch is on for this instance or, with
// stickiness "key", for the request key carried by ctx (see WithKey).
// It takes no lock and does not allocate. The answer "off" for instance
// stickiness is inlined into the caller: two atomic loads (the state and
// the switch's read flag, see switchSignals) and a few field reads, no
// write. Every other answer takes a call: a degraded one also costs an
// atomic add (the switch's degraded counter).
func (h *Handle) On(ctx context.Context) bool {
	if (*state)(atomic.LoadPointer(h.p)).entries[h.idx].off && atomic.LoadUint32(h.read) != 0 {
		return false
	}
	return h.slowOn(ctx)
}

// slowOn answers degraded checks, the first check since the reporter took
// the read flag, key stickiness and the fallback chain, and counts them.
func (h *Handle) slowOn(ctx context.Context) bool {
	if h.sig.verified(ctx) {
		return true // a degraded run of shadow verification; not counted
	}
	s := h.st.Load()
	if h.idx < len(s.entries) {
		if e := &s.entries[h.idx]; e.sw != nil {
			return h.sig.count(e.answer(ctx))
		}
	}
	h.sig.served.Add(1)
	return h.sig.count(h.fbOn)
}

// Source tells where the current answer of On comes from; live data is
// reported as SourceStale while the client is stale.
func (h *Handle) Source() Source {
	if e := h.entry(); e != nil {
		return h.c.reported(e.source)
	}
	return h.fbSource
}

// Level returns the switch's configured level ("L1" … "L5"), or "" when
// there is no published value. It does not say whether the switch is on.
func (h *Handle) Level() wire.Level {
	if e := h.entry(); e != nil {
		return e.sw.Level
	}
	return ""
}

// Fallback decodes the switch's L1 fallback payload into v. It returns
// ErrNoFallback when there is none. Each value it serves counts in the
// switch's fleet signals.
func (h *Handle) Fallback(v any) error {
	e := h.entry()
	if e == nil || len(e.sw.Fallback) == 0 {
		return ErrNoFallback
	}
	if err := json.Unmarshal(e.sw.Fallback, v); err != nil {
		return err
	}
	if !h.sig.shadowing() { // values of degraded runs (verify.go) are not served
		h.sig.fallbacks.Add(1)
	}
	return nil
}

// MaxStaleness returns the L2 bound of the switch, 0 when unset.
func (h *Handle) MaxStaleness() time.Duration {
	if e := h.entry(); e != nil {
		return e.sw.MaxStaleness.D()
	}
	return 0
}

// Value returns the effective published switch, nil when there is none.
// The value is shared: do not modify it.
func (h *Handle) Value() *wire.Switch {
	if e := h.entry(); e != nil {
		return e.sw
	}
	return nil
}

// On reports whether the named switch is on, like Handle.On, with a map
// lookup instead of a resolved handle, and counts the answer the same way
// for every name the client knows (published, in the disk snapshot, or
// with a handle). Names never published answer from the environment or
// off.
func (c *Client) On(ctx context.Context, name string) bool {
	s := c.state.Load()
	var sig *switchSignals
	if i, ok := s.index[name]; ok && i < uint32(len(s.entries)) {
		if e := &s.entries[i]; e.sw != nil {
			if s.sigs[i].verified(ctx) {
				return true
			}
			return s.sigs[i].count(e.answer(ctx))
		}
		sig = s.sigs[i]
	}
	c.fallbacks.Add(1)
	on := c.envOn(name)
	if sig != nil {
		sig.count(on)
	}
	return on
}

// envOn is the environment's answer for a switch name, off when unset.
func (c *Client) envOn(name string) bool {
	if len(c.env) == 0 {
		return false
	}
	var buf [64]byte
	if len(name) > len(buf) {
		return false
	}
	return c.env[string(envNameBuf(buf[:0], name))]
}

// envName maps a switch or app name to its environment form: upper case,
// "." and "-" replaced by "_".
func envName(name string) string {
	return string(envNameBuf(make([]byte, 0, len(name)), name))
}

func envNameBuf(b []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		ch := name[i]
		switch {
		case ch >= 'a' && ch <= 'z':
			ch -= 'a' - 'A'
		case ch == '.' || ch == '-':
			ch = '_'
		}
		b = append(b, ch)
	}
	return b
}

// EnvVar returns the environment variable that sets the fallback of a
// switch: SWITCHYARD_SWITCH_<APP>_<NAME>.
func EnvVar(app, name string) string {
	return "SWITCHYARD_SWITCH_" + envName(app) + "_" + envName(name)
}

// readEnv collects SWITCHYARD_SWITCH_<APP>_* variables, keyed by the
// environment form of the switch name.
func readEnv(app string, environ []string) map[string]bool {
	prefix := "SWITCHYARD_SWITCH_" + envName(app) + "_"
	m := map[string]bool{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, prefix) {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "on", "true", "1":
			m[k[len(prefix):]] = true
		case "off", "false", "0":
			m[k[len(prefix):]] = false
		}
	}
	return m
}
