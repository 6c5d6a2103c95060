// Package limit holds the enforcement primitives behind published limit
// rules (wire.LimitRule): token bucket, GCRA, sliding window, concurrency,
// adaptive concurrency and circuit breaker, the overload levers — client-side
// adaptive throttling (Throttler), system protection (System, with a
// cgroup-aware CPUMeter), a CoDel queue with adaptive LIFO for concurrency
// waiters, criticality reserves and warm-up of raised limits — plus a
// key-bounded container for per-key state.
//
// Every primitive takes a Clock, so tests drive time by hand and never sleep;
// the default clock reads the runtime's monotonic nanotime, the cheapest time
// source Go offers. Hot paths (TokenBucket.Allow, Breaker.Do in the closed
// state) take no lock and allocate nothing.
//
// All kinds share one shape for the layer above: Admit returns a Permit and a
// Decision. A rejected Decision carries RetryAfter and a Reason from a fixed
// vocabulary; the Permit must be finished with Done when the guarded work ends
// (a no-op for the rate kinds). Shadow mode is the caller's business:
// Decision.Pass reports whether to let the request through and whether it
// would have been rejected.
//
// Rules change live: Update keeps what still makes sense (tokens, in-flight
// count, breaker state) and a change of kind builds a fresh limiter.
//
// The package is pure Go and imports only the standard library and sdk/wire.
// It must not import etcd, Prometheus, gin, gorm or anything else in the
// repository; the SDK core wires it to rules and metrics.
package limit
