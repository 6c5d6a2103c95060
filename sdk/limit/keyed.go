package limit

import (
	"fmt"
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Defaults of a rule's key_by bounds.
const (
	DefaultMaxKeys = 10_000
	DefaultKeyTTL  = 10 * time.Minute
)

// Keyed keeps one limiter per key (tenant, user, client IP) for a key_by
// rule, bounded so a flood of distinct keys cannot exhaust memory: at most
// MaxKeys keys keep state (the least recently used is dropped first) and a
// key idle for longer than TTL starts afresh. A dropped key simply gets a new
// limiter next time, so under a key flood each key is limited at least as
// leniently as a new client. A key with requests still in flight (a
// concurrency or adaptive rule) is not idle: the TTL never resets it. Only
// the cap may drop such a key; its permits still release into the dropped
// limiter, so a key that comes back may briefly exceed its max.
type Keyed struct {
	mu    sync.Mutex
	rule  *wire.LimitRule
	clock Clock
	opts  options
	max   int
	ttl   int64
	m     map[string]*keyEntry
	lru   keyEntry // sentinel: lru.next is the most recent, lru.prev the least
}

type keyEntry struct {
	key        string
	l          Limiter
	seen       int64
	prev, next *keyEntry
}

// NewKeyed returns an empty container for rule; KeyBy.MaxKeys and KeyBy.TTL
// bound it (0 means DefaultMaxKeys and DefaultKeyTTL).
func NewKeyed(r *wire.LimitRule, clock Clock, opts ...Option) (*Keyed, error) {
	k := &Keyed{clock: orSystem(clock), opts: collect(opts), m: make(map[string]*keyEntry)}
	k.lru.next, k.lru.prev = &k.lru, &k.lru
	if err := k.Update(r); err != nil {
		return nil, err
	}
	return k, nil
}

// Update applies a changed rule to every key's limiter (see Update); a change
// of kind or a malformed rule is refused for all keys alike.
func (k *Keyed) Update(r *wire.LimitRule) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("limit: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	kindChanged := k.rule == nil || k.rule.Kind != r.Kind
	rc := *r
	k.rule = &rc
	k.max = r.KeyBy.MaxKeys
	if k.max <= 0 {
		k.max = DefaultMaxKeys
	}
	k.ttl = int64(r.KeyBy.TTL)
	if k.ttl <= 0 {
		k.ttl = int64(DefaultKeyTTL)
	}
	if kindChanged {
		clear(k.m)
		k.lru.next, k.lru.prev = &k.lru, &k.lru
		return nil
	}
	for e := k.lru.next; e != &k.lru; e = e.next {
		e.l.update(&rc)
	}
	for len(k.m) > k.max {
		k.removeLocked(k.lru.prev)
	}
	return nil
}

// Get returns the limiter of key, creating it if needed.
func (k *Keyed) Get(key string) Limiter {
	now := k.clock.Nanotime()
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.m[key]; ok {
		if now-e.seen > k.ttl && !busy(e.l) {
			e.l = k.newLocked()
		}
		e.seen = now
		k.unlinkLocked(e)
		k.pushFrontLocked(e)
		return e.l
	}
	// Drop the expired tail and keep below the cap before inserting; an
	// expired key with requests in flight is kept (moved to the front).
	for t := k.lru.prev; t != &k.lru && (len(k.m) >= k.max || now-t.seen > k.ttl); t = k.lru.prev {
		if len(k.m) < k.max && busy(t.l) {
			t.seen = now
			k.unlinkLocked(t)
			k.pushFrontLocked(t)
			continue
		}
		k.removeLocked(t)
	}
	e := &keyEntry{key: key, l: k.newLocked(), seen: now}
	k.m[key] = e
	k.pushFrontLocked(e)
	return e.l
}

// Admit admits one request for key.
func (k *Keyed) Admit(key string) (Permit, Decision) { return k.Get(key).Admit() }

// Len reports how many keys keep state.
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}

// busy reports whether l has requests in flight (concurrency, adaptive).
func busy(l Limiter) bool {
	f, ok := l.(interface{ InFlight() int })
	return ok && f.InFlight() > 0
}

func (k *Keyed) newLocked() Limiter {
	return build(k.rule, k.clock, k.opts)
}

func (k *Keyed) removeLocked(e *keyEntry) {
	k.unlinkLocked(e)
	delete(k.m, e.key)
}

func (k *Keyed) unlinkLocked(e *keyEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (k *Keyed) pushFrontLocked(e *keyEntry) {
	e.prev, e.next = &k.lru, k.lru.next
	k.lru.next.prev = e
	k.lru.next = e
}
