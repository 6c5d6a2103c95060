package sdk

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Source says where the answer for a switch comes from.
type Source uint8

// Sources of a switch's answer. Live data is tried first, then the disk
// snapshot, the environment and the Default option.
const (
	SourceNone     Source = iota // no value anywhere: the answer is off
	SourceLive                   // live data from etcd
	SourceSnapshot               // the disk snapshot, live data not yet seen
	SourceEnv                    // SWITCHYARD_SWITCH_<APP>_<NAME>
	SourceDefault                // the Default option of Client.Switch
	// SourceStale is live data while the client is stale (see
	// Client.Stale): the last state etcd delivered, kept while etcd cannot
	// be reached.
	SourceStale
)

func (s Source) String() string {
	switch s {
	case SourceLive:
		return "live"
	case SourceSnapshot:
		return "snapshot"
	case SourceEnv:
		return "env"
	case SourceDefault:
		return "default"
	case SourceStale:
		return "stale"
	}
	return "none"
}

// item is one decoded etcd key/value.
type item struct {
	key    string
	kind   string // wire.KindSwitches, KindOverrides or KindLimits
	app    string
	name   string // switch name or limit resource
	modRev int64
	value  []byte
	sw     *wire.Switch
	lim    *wire.LimitRule
}

// entry is the precomputed answer for one switch name in one snapshot.
type entry struct {
	sw     *wire.Switch // effective value; nil: no data, use the handle's fallback
	fixed  bool         // data present and the answer does not depend on the request
	on     bool         // decision for this instance (instance hash)
	gate   bool         // state on and selector matches (key stickiness)
	keyed  bool         // stickiness "key"
	off    bool         // fixed and off: Handle.On's inlined answer
	source Source
	basis  uint32
	seed   uint64  // FNV state after app/name/, for request keys
	listed *keySet // the rollout's key lists; nil without lists
	// warming says an L4 warm-up runs from warmFrom (a Client.clock
	// reading): the switch turned off for this instance then (warmup.go).
	warming  bool
	warmFrom int64
}

// answer decides for this instance or, with key stickiness, for the
// request key carried by ctx.
func (e *entry) answer(ctx context.Context) bool {
	if e.fixed {
		return e.on
	}
	return e.keyOn(ctx)
}

// keyOn decides by the request key carried by ctx: its place in the
// rollout's key lists, else (key stickiness) its hash; a request without
// a key, or not listed under instance stickiness, gets the instance
// decision.
func (e *entry) keyOn(ctx context.Context) bool {
	if !e.gate {
		return false
	}
	k, ok := ctx.Value(keyCtxKey{}).(string)
	if !ok {
		return e.on
	}
	h := wire.FNV(e.seed, k)
	if e.listed != nil {
		if on, ok := e.listed.lookup(h, k); ok {
			return on
		}
	}
	if !e.keyed {
		return e.on
	}
	return h%Buckets < uint64(e.basis)
}

// keySet holds a rollout's listed keys in an open-addressing table
// indexed by each key's rollout hash (the FNV state over app/name/key), so
// one hash of the request key serves the lists and the percent. A probe
// reads only hashes, 8 bytes a slot, until one equals the key's.
type keySet struct {
	shift  uint     // 64 - log2(len(hashes))
	hashes []uint64 // hash|1 per slot; 0: empty
	refs   []int32  // per slot: index into keys, +1, negated for an excluded key
	keys   []string
}

// newKeySet builds the set of a rollout's lists, nil when it has none.
// An excluded key is stored last and wins over the same key included.
func newKeySet(seed uint64, r wire.Rollout) *keySet {
	n := len(r.Include) + len(r.Exclude)
	if n == 0 {
		return nil
	}
	bits := uint(1)
	for 1<<bits < 2*n { // load factor at most 1/2
		bits++
	}
	s := &keySet{shift: 64 - bits, hashes: make([]uint64, 1<<bits), refs: make([]int32, 1<<bits), keys: make([]string, 0, n)}
	for _, k := range r.Include {
		s.put(wire.FNV(seed, k), k, true)
	}
	for _, k := range r.Exclude {
		s.put(wire.FNV(seed, k), k, false)
	}
	return s
}

// slot is where a hash's probe starts (Fibonacci hashing spreads the
// FNV state's bits over the table).
func (s *keySet) slot(h uint64) uint64 { return h * 0x9E3779B97F4A7C15 >> s.shift }

func (s *keySet) put(h uint64, k string, in bool) {
	mask := uint64(len(s.hashes) - 1)
	for i := s.slot(h); ; i = (i + 1) & mask {
		if s.hashes[i] == 0 {
			s.keys = append(s.keys, k)
			s.hashes[i], s.refs[i] = h|1, int32(len(s.keys))
		} else if s.hashes[i] != h|1 || s.keys[abs32(s.refs[i])-1] != k {
			continue
		}
		if !in {
			s.refs[i] = -abs32(s.refs[i])
		}
		return
	}
}

// lookup finds key k of hash h: listed reports whether a list names it,
// in whether it is included.
func (s *keySet) lookup(h uint64, k string) (in, listed bool) {
	mask := uint64(len(s.hashes) - 1)
	for i := s.slot(h); ; i = (i + 1) & mask {
		switch s.hashes[i] {
		case 0:
			return false, false
		case h | 1:
			if r := s.refs[i]; s.keys[abs32(r)-1] == k {
				return r > 0, true
			}
		}
	}
}

// len counts the listed keys.
func (s *keySet) len() int { return len(s.keys) }

func abs32(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}

// state is an immutable snapshot of everything the client knows. It is
// built by the single writer and published through an atomic pointer;
// readers never see it change.
type state struct {
	rev     int64
	items   map[string]*item           // by etcd key, switches, overrides and limits
	index   map[string]uint32          // switch name -> entries index, stable for the client's lifetime
	entries []entry                    // by index
	sigs    []*switchSignals           // by index, as long as entries; shared by every state
	limits  map[string]*wire.LimitRule // effective rule by resource
	source  Source                     // SourceLive, SourceSnapshot or SourceNone
	// dataAt is when the data was last known fresh: the disk snapshot's
	// written_at or the time of the last applied live change.
	dataAt time.Time
}

// selectorMatcher returns a memoized "does this selector match labels".
// An unparsable selector matches nothing.
func selectorMatcher(labels map[string]string) func(selector string) bool {
	memo := map[string]bool{}
	return func(selector string) bool {
		if selector == "" {
			return true
		}
		m, ok := memo[selector]
		if !ok {
			sel, err := wire.ParseSelector(selector)
			m = err == nil && sel.Matches(labels)
			memo[selector] = m
		}
		return m
	}
}

func buildEntry(sw *wire.Switch, source Source, instanceID string, match func(selector string) bool) entry {
	if sw == nil {
		return entry{}
	}
	e := entry{sw: sw, source: source}
	basis := sw.Rollout.Basis()
	if basis < 0 {
		basis = 0
	}
	if basis > Buckets {
		basis = Buckets
	}
	e.basis = uint32(basis)
	e.seed = wire.Seed(sw.App, sw.Name)
	e.keyed = sw.Rollout.Stickiness == wire.StickyKey
	e.gate = sw.State == wire.StateOn && match(sw.Rollout.Selector)
	e.on = e.gate && wire.FNV(e.seed, instanceID)%Buckets < uint64(e.basis)
	if e.gate {
		e.listed = newKeySet(e.seed, sw.Rollout)
	}
	e.fixed = (!e.keyed && e.listed == nil) || !e.gate
	e.off = e.fixed && !e.on
	return e
}

// noEntry answers "no data" for indexes past the end of a state's entries.
var noEntry entry

// at returns the entry at index i, or an empty one.
func (s *state) at(i uint32) *entry {
	if i < uint32(len(s.entries)) {
		return &s.entries[i]
	}
	return &noEntry
}

// statePtr is the atomic pointer to the current immutable state. It wraps
// a plain unsafe.Pointer instead of atomic.Pointer[state] because the
// generic method's extra inlining cost would push Handle.On over the
// compiler's inlining budget.
type statePtr struct{ p unsafe.Pointer }

// Load returns the current state.
func (s *statePtr) Load() *state { return (*state)(atomic.LoadPointer(&s.p)) }

// Store publishes a new state.
func (s *statePtr) Store(v *state) { atomic.StorePointer(&s.p, unsafe.Pointer(v)) }
