package limit_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

func keyedRule(maxKeys int, ttl time.Duration) *wire.LimitRule {
	return rule(wire.KindTokenBucket, func(r *wire.LimitRule) {
		r.Rate, r.Burst = 1, 2
		r.KeyBy = wire.KeyBy{Source: "header", Name: "X-Tenant", MaxKeys: maxKeys, TTL: wire.Duration(ttl)}
	})
}

func TestKeyedFloodStaysAtCap(t *testing.T) {
	const maxKeys, flood = 10_000, 1_000_000
	k, err := limit.NewKeyed(keyedRule(maxKeys, time.Hour), limit.NewFakeClock())
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	buf := make([]byte, 0, 16)
	for i := range flood {
		buf = strconv.AppendInt(append(buf[:0], 'k'), int64(i), 10)
		if _, d := k.Admit(string(buf)); !d.OK {
			t.Fatalf("new key %d rejected", i)
		}
		if n := k.Len(); n > maxKeys {
			t.Fatalf("after %d keys, %d keep state, cap %d", i+1, n, maxKeys)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if k.Len() != maxKeys {
		t.Fatalf("keys with state = %d, want the cap %d", k.Len(), maxKeys)
	}
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d distinct keys, cap %d: %d keys kept, heap %d KiB → %d KiB (+%d KiB, %d B/key kept)",
		flood, maxKeys, k.Len(), before.HeapAlloc>>10, after.HeapAlloc>>10, growth>>10, growth/maxKeys)
	if growth > 64<<20 {
		t.Fatalf("heap grew by %d MiB for %d kept keys", growth>>20, maxKeys)
	}
	runtime.KeepAlive(k)
}

func TestKeyedLRUAndTTL(t *testing.T) {
	clock := limit.NewFakeClock()
	k, err := limit.NewKeyed(keyedRule(2, time.Minute), clock)
	if err != nil {
		t.Fatal(err)
	}
	drain := func(key string) {
		for {
			if _, d := k.Admit(key); !d.OK {
				return
			}
		}
	}
	tokensOf := func(key string) float64 { return k.Get(key).(*limit.TokenBucket).Tokens() }

	drain("a")
	drain("b")
	k.Get("a") // a is now the most recent
	k.Get("c") // evicts b, the least recently used
	if got := tokensOf("a"); got != 0 {
		t.Fatalf("a lost its state (tokens %v), want it kept as recently used", got)
	}
	if got := tokensOf("b"); got != 2 { // evicts c; b comes back fresh and full
		t.Fatalf("b tokens = %v, want a fresh bucket after eviction", got)
	}
	drain("b")
	clock.Advance(time.Minute + time.Second) // b idle past the TTL
	if got := tokensOf("b"); got != 2 {
		t.Fatalf("b tokens after TTL = %v, want fresh 2", got)
	}
	if k.Len() > 2 {
		t.Fatalf("Len = %d above cap 2", k.Len())
	}
}

func TestKeyedUpdate(t *testing.T) {
	clock := limit.NewFakeClock()
	k, err := limit.NewKeyed(keyedRule(10, time.Minute), clock)
	if err != nil {
		t.Fatal(err)
	}
	k.Admit("a")
	r := keyedRule(10, time.Minute)
	r.Rate = 5
	if err := k.Update(r); err != nil {
		t.Fatal(err)
	}
	if got := k.Get("a").(*limit.TokenBucket).Tokens(); got != 1 {
		t.Fatalf("tokens after rate change = %v, want 1 kept", got)
	}
	r = rule(wire.KindConcurrency, func(r *wire.LimitRule) { r.Max = 1 })
	if err := k.Update(r); err != nil {
		t.Fatal(err)
	}
	if k.Len() != 0 || k.Get("a").Kind() != wire.KindConcurrency {
		t.Fatalf("kind change kept old state: len %d kind %s", k.Len(), k.Get("a").Kind())
	}
	bad := keyedRule(10, time.Minute)
	bad.Rate = 0
	if err := k.Update(bad); err == nil {
		t.Fatal("Update accepted a rule with rate 0")
	}
}

// TestKeyedTTLKeepsBusyKeys: a key whose concurrency slot is still held is
// not idle; the TTL must not hand it a fresh, empty limiter (which would
// admit a second request over max 1).
func TestKeyedTTLKeepsBusyKeys(t *testing.T) {
	clock := limit.NewFakeClock()
	k, err := limit.NewKeyed(rule(wire.KindConcurrency, func(r *wire.LimitRule) {
		r.Max = 1
		r.KeyBy = wire.KeyBy{Source: "header", Name: "X-Tenant", MaxKeys: 10, TTL: wire.Duration(time.Minute)}
	}), clock)
	if err != nil {
		t.Fatal(err)
	}
	long, d := k.Admit("a")
	if !d.OK {
		t.Fatal("first request rejected")
	}
	clock.Advance(2 * time.Minute) // the request runs past the TTL
	if _, d := k.Admit("a"); d.OK {
		t.Fatal("existing key: second request admitted over max 1 after the TTL")
	}
	clock.Advance(2 * time.Minute)
	k.Get("b") // a new key sweeps the expired tail
	if _, d := k.Admit("a"); d.OK {
		t.Fatal("after a sweep: second request admitted over max 1")
	}
	long.Done(nil)
	clock.Advance(2 * time.Minute)
	if _, d := k.Admit("a"); !d.OK {
		t.Fatal("idle key past its TTL still limited")
	}
}
