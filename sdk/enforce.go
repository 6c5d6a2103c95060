package sdk

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// This file turns published limit rules into live enforcers: a Limiter
// handle per resource whose current enforcer sits behind an atomic pointer
// and is rebuilt (with limit.Update, so state survives) whenever the rule
// or, for cluster scope, the number of live instances changes.

// Headers is where a key_by rule with source "header" reads its key:
// http.Header satisfies it, the gRPC adapter wraps metadata.
type Headers interface {
	Get(name string) string
}

// RejectError is returned by Limiter.Acquire and Limiter.Do when the rule
// rejects the request. It unwraps to limit.ErrLimited or limit.ErrOpen.
type RejectError struct {
	Resource string
	Decision limit.Decision
}

func (e *RejectError) Error() string {
	return "sdk: " + e.Resource + ": " + e.Decision.Reason.String()
}

// Unwrap returns limit.ErrOpen for an open breaker, limit.ErrLimited otherwise.
func (e *RejectError) Unwrap() error { return e.Decision.Err() }

// LimiterOption configures a Limiter handle. Options take effect on the
// first Client.Limiter call for a resource; later calls return the same
// handle and ignore theirs.
type LimiterOption func(*limiterOptions)

type limiterOptions struct {
	clock     limit.Clock
	isFailure func(error) bool
	cpu       limit.CPUSource
}

// LimitCPU sets the CPU source a system rule reads (default: the client's
// meter of its container's cgroup, sampled every 250 ms from the first
// system rule until Close). Tests pass a fake.
func LimitCPU(c limit.CPUSource) LimiterOption { return func(o *limiterOptions) { o.cpu = c } }

// LimitClock sets the clock the resource's limiters read (default the
// runtime's monotonic clock). Tests pass a limit.FakeClock.
func LimitClock(c limit.Clock) LimiterOption { return func(o *limiterOptions) { o.clock = c } }

// IsFailure sets a breaker rule's failure classifier: return false for
// business errors (bad input, not found) so they count as success.
func IsFailure(f func(error) bool) LimiterOption {
	return func(o *limiterOptions) { o.isFailure = f }
}

// Limiter enforces the limit rule published for one resource. Keep the
// handle: it stays valid across rule changes, which apply on the next
// request with the limiter's state kept where the kind is unchanged (see
// limit.Update). While no rule is published every request is allowed at the
// cost of one atomic load.
//
// mode "shadow" decides as usual, counts what would have been rejected
// (metric decision="would_reject") and lets every request through at once
// (a GCRA rule's Decision.Wait is zero).
// scope "cluster" divides the rule's quota by the live instances of the app
// (see ClusterShare). key_by keeps per-key state bounded by the rule's
// max_keys and ttl (limit.Keyed); the key comes from the header named by the
// rule (AdmitHeaders) or the context key set with WithKey; requests without
// a key share the state of the empty key.
type Limiter struct {
	resource string
	e        *enforcement
	opts     []limit.Option
	clock    limit.Clock
	cur      atomic.Pointer[enforcer] // nil: no rule, allow everything

	// decision counters, read at scrape time
	allowed     atomic.Uint64
	rejected    [reasonSlots]atomic.Uint64 // by limit.Reason
	wouldReject [reasonSlots]atomic.Uint64
	inflight    atomic.Int64
	transitions [3][3]atomic.Uint64 // breaker from -> to
}

// enforcer is the immutable enforcement of one rule version.
type enforcer struct {
	rule   *wire.LimitRule // effective rule (cluster share applied)
	src    *wire.LimitRule // the published rule
	shadow bool
	hold   bool               // concurrency, adaptive, breaker, throttle, system: permits must be finished
	queue  bool               // concurrency with a CoDel queue: guards wait for a slot
	tb     *limit.TokenBucket // fast path for unkeyed token buckets
	br     *limit.Breaker     // fast path for unkeyed breakers in enforce mode
	slots  bool               // concurrency, adaptive, system: count in-flight requests
	lim    limit.Limiter      // unkeyed
	keyed  *limit.Keyed       // key_by rules
	header string             // key_by source header
	ctxKey bool               // key_by source context
}

// Permit is a limiter admission. Finish it exactly once with Done (or
// Release, or Finish) when the guarded work ends; the zero Permit is a no-op.
type Permit struct {
	p limit.Permit
	n *atomic.Int64 // in-flight counter of concurrency and adaptive rules
}

// Done finishes the permit; a non-nil err counts as a failure for breaker
// and adaptive rules (the breaker applies its IsFailure hook).
func (p Permit) Done(err error) {
	if p.n != nil {
		p.n.Add(-1)
	}
	p.p.Done(err)
}

// Finish finishes the permit with an outcome the caller judged (an HTTP
// status, say).
func (p Permit) Finish(ok bool) {
	if p.n != nil {
		p.n.Add(-1)
	}
	p.p.Finish(ok)
}

// Release finishes the permit as a success.
func (p Permit) Release() { p.Done(nil) }

// Holds reports whether the permit holds a slot whose outcome matters
// (concurrency, adaptive and breaker rules): finish it with the real
// outcome of the work.
func (p Permit) Holds() bool { return p.p != limit.Permit{} }

// Limiter returns the enforcement handle of a resource ("POST /orders"),
// creating it on first use. It never fails: a resource without a published
// rule allows everything until one is published.
func (c *Client) Limiter(resource string, opts ...LimiterOption) *Limiter {
	e := c.enforcement()
	if l, ok := e.limiters.Load(resource); ok {
		return l.(*Limiter)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok := e.limiters.Load(resource); ok {
		return l.(*Limiter)
	}
	var o limiterOptions
	for _, f := range opts {
		f(&o)
	}
	l := &Limiter{resource: resource, e: e, clock: o.clock}
	l.opts = []limit.Option{limit.WithStateChange(l.onTransition)}
	if o.isFailure != nil {
		l.opts = append(l.opts, limit.WithIsFailure(o.isFailure))
	}
	if o.cpu == nil {
		o.cpu = &e.cpu
	}
	l.opts = append(l.opts, limit.WithCPU(o.cpu))
	e.refreshLocked(l)
	e.limiters.Store(resource, l)
	// A change applied between the refresh and the Store was not seen by
	// the change listener (it found no handle): catch up.
	if pub, _ := c.LimitRule(resource); pub != l.published() {
		e.refreshLocked(l)
	}
	return l
}

// published returns the published rule behind the current enforcer.
func (l *Limiter) published() *wire.LimitRule {
	if e := l.cur.Load(); e != nil {
		return e.src
	}
	return nil
}

// Resource returns the resource the limiter protects.
func (l *Limiter) Resource() string { return l.resource }

// Rule returns the effective rule being enforced (for cluster scope with
// the per-instance share applied), nil when none is published.
func (l *Limiter) Rule() *wire.LimitRule {
	if e := l.cur.Load(); e != nil {
		return e.rule
	}
	return nil
}

var admitAll = limit.Decision{OK: true}

// reasonSlots sizes the per-reason counters: a power of two at least
// limit.NumReasons, so indexing by Reason&(reasonSlots-1) needs no bounds check.
const reasonSlots = 8

var _ [reasonSlots - limit.NumReasons]struct{} // compile-time: reasonSlots ≥ NumReasons

// Allow decides one request. For the rate kinds (token_bucket, gcra,
// sliding_window) it is the admission itself; GCRA's Decision.Wait says how
// long to wait before proceeding. For concurrency, adaptive and breaker rules
// Allow only checks that a request would be admitted now and holds nothing;
// throttle and system rules decide only at admission, so Allow answers OK
// for them. Guard such work with Admit, Acquire or Do. In shadow mode the
// answer is always OK, with no Wait. Allow does not allocate.
func (l *Limiter) Allow(ctx context.Context) limit.Decision {
	e := l.cur.Load()
	if e == nil {
		return admitAll
	}
	if e.tb != nil {
		return l.count(e, e.tb.Allow())
	}
	return l.allowSlow(ctx, e, nil)
}

// AllowHeaders is Allow for a key_by rule whose key is a request header.
func (l *Limiter) AllowHeaders(ctx context.Context, h Headers) limit.Decision {
	e := l.cur.Load()
	if e == nil {
		return admitAll
	}
	if e.tb != nil {
		return l.count(e, e.tb.Allow())
	}
	return l.allowSlow(ctx, e, h)
}

func (l *Limiter) allowSlow(ctx context.Context, e *enforcer, h Headers) limit.Decision {
	lim := e.limiter(ctx, h)
	if !e.hold {
		_, d := lim.AdmitAs(criticality(ctx))
		return l.count(e, d)
	}
	d := limit.Decision{OK: true}
	switch x := lim.(type) {
	case *limit.Concurrency:
		d.OK = x.Free(criticality(ctx))
		d.Reason = limit.ReasonConcurrency
	case *limit.Adaptive:
		d.OK = x.InFlight() < x.Limit()
		d.Reason = limit.ReasonConcurrency
	case *limit.Breaker:
		// Open with its period over: the next call is admitted as a probe.
		d.RetryAfter = x.RetryAfter()
		d.OK = x.State() != limit.StateOpen || d.RetryAfter == 0
		d.Reason = limit.ReasonBreakerOpen
	}
	if d.OK {
		d.Reason = limit.ReasonNone
	}
	return l.count(e, d)
}

// Admit decides one request without blocking. An admitted request holds
// the returned Permit until Done; a rejected one gets a zero Permit and a
// Decision with RetryAfter and Reason. In shadow mode every request is
// admitted.
func (l *Limiter) Admit(ctx context.Context) (Permit, limit.Decision) {
	return l.AdmitHeaders(ctx, nil)
}

// AdmitHeaders is Admit for a key_by rule whose key is a request header
// (h may be nil for other rules).
func (l *Limiter) AdmitHeaders(ctx context.Context, h Headers) (Permit, limit.Decision) {
	e := l.cur.Load()
	if e == nil {
		return Permit{}, admitAll
	}
	if e.tb != nil {
		return Permit{}, l.count(e, e.tb.Allow())
	}
	p, d := e.limiter(ctx, h).AdmitAs(criticality(ctx))
	return l.permit(e, p, d)
}

// Acquire admits one request, waiting where the rule allows it: for a slot
// of a concurrency or adaptive rule until ctx ends (a concurrency rule with
// a CoDel queue gives up sooner, with reason queue_timeout), for GCRA's
// Decision.Wait. A rejection is a *RejectError (errors.Is limit.ErrLimited
// or limit.ErrOpen); a context that ends first returns its error.
func (l *Limiter) Acquire(ctx context.Context) (Permit, error) { return l.AcquireHeaders(ctx, nil) }

// AcquireHeaders is Acquire for a key_by rule whose key is a request header
// (h may be nil for other rules).
func (l *Limiter) AcquireHeaders(ctx context.Context, h Headers) (Permit, error) {
	e := l.cur.Load()
	if e == nil {
		return Permit{}, nil
	}
	lim := e.limiter(ctx, h)
	if w, ok := lim.(interface {
		AcquireAs(context.Context, limit.Criticality) (limit.Permit, error)
	}); ok && !e.shadow {
		p, err := w.AcquireAs(ctx, criticality(ctx))
		if errors.Is(err, limit.ErrLimited) {
			d := limit.Decision{Reason: limit.ReasonQueueTimeout}
			l.count(e, d)
			return Permit{}, &RejectError{Resource: l.resource, Decision: d}
		}
		if err != nil {
			return Permit{}, err
		}
		l.allowed.Add(1)
		l.inflight.Add(1)
		return Permit{p: p, n: &l.inflight}, nil
	}
	p, d := lim.AdmitAs(criticality(ctx))
	pm, d := l.permit(e, p, d)
	if !d.OK {
		return Permit{}, &RejectError{Resource: l.resource, Decision: d}
	}
	if err := limit.Sleep(ctx, d.Wait); err != nil {
		pm.Finish(true)
		return Permit{}, err
	}
	return pm, nil
}

// acquireDecision is AcquireHeaders for guards: a rejection as a Decision
// (the context's end counts as queue_timeout: the request got no slot).
func (l *Limiter) acquireDecision(ctx context.Context, h Headers) (Permit, limit.Decision) {
	p, err := l.AcquireHeaders(ctx, h)
	var re *RejectError
	switch {
	case err == nil:
		return p, admitAll
	case errors.As(err, &re):
		return Permit{}, re.Decision
	}
	return Permit{}, limit.Decision{Reason: limit.ReasonQueueTimeout}
}

// Queues reports whether the rule makes requests wait for a slot (a
// concurrency rule with a CoDel queue): guards then Acquire instead of
// Admit.
func (l *Limiter) Queues() bool {
	e := l.cur.Load()
	return e != nil && e.queue
}

// Do runs fn under the rule: it acquires (see Acquire), runs fn and finishes
// the permit with fn's error; a panic in fn counts as a failure and
// propagates. With a breaker rule this is the breaker's Do.
func (l *Limiter) Do(ctx context.Context, fn func(context.Context) error) (err error) {
	if e := l.cur.Load(); e != nil && e.br != nil {
		// Breaker fast path: the breaker's own Do, no interface calls.
		called := false
		err = e.br.Do(func() error {
			called = true
			return fn(ctx)
		})
		if called {
			l.allowed.Add(1)
			return err
		}
		l.rejected[limit.ReasonBreakerOpen].Add(1)
		return &RejectError{Resource: l.resource, Decision: limit.Decision{Reason: limit.ReasonBreakerOpen, RetryAfter: e.br.RetryAfter()}}
	}
	p, err := l.Acquire(ctx)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			p.Finish(false)
		}
	}()
	err = fn(ctx)
	done = true
	p.Done(err)
	return err
}

// count records a decision of a rate kind and applies the mode.
func (l *Limiter) count(e *enforcer, d limit.Decision) limit.Decision {
	if d.OK {
		l.allowed.Add(1)
		if d.Wait > 0 && e.shadow {
			d.Wait = 0 // shadow mode does not pace either
		}
		return d
	}
	if e.shadow {
		l.wouldReject[d.Reason&(reasonSlots-1)].Add(1)
		return admitAll
	}
	l.rejected[d.Reason&(reasonSlots-1)].Add(1)
	return d
}

// permit records a decision, applies the mode and wraps the permit.
func (l *Limiter) permit(e *enforcer, p limit.Permit, d limit.Decision) (Permit, limit.Decision) {
	if d = l.count(e, d); !d.OK || !e.hold {
		return Permit{}, d
	}
	if !e.slots {
		return Permit{p: p}, d
	}
	l.inflight.Add(1)
	return Permit{p: p, n: &l.inflight}, d
}

func (l *Limiter) onTransition(from, to limit.State) {
	if from <= 2 && to <= 2 {
		l.transitions[from][to].Add(1)
	}
}

// limiter returns the limiter deciding for this request: the shared one or
// the request key's.
func (e *enforcer) limiter(ctx context.Context, h Headers) limit.Limiter {
	if e.keyed == nil {
		return e.lim
	}
	var key string
	if e.ctxKey {
		key, _ = KeyFrom(ctx)
	} else if h != nil {
		key = h.Get(e.header)
	}
	return e.keyed.Get(key)
}

// ClusterShare returns the per-instance rule of a cluster-scope rule on
// one of n live instances; instance-scope rules and breakers are returned
// unchanged. The quota is divided by n with a floor, so that an instance
// is never starved however many peers there are:
//
//   - counts (burst, limit, max, min) become ceil(q/n), at least 1;
//   - rates become q/n, at least min(q, 1) request per second.
//
// The floor can admit slightly more than the cluster quota in total (at
// most one request, or one request per second, per instance); it never
// admits less.
func ClusterShare(r *wire.LimitRule, n int) *wire.LimitRule {
	if r.Scope != wire.ScopeCluster || n <= 1 || r.Kind == wire.KindBreaker || r.Kind == wire.KindThrottle || r.Kind == wire.KindSystem {
		return r
	}
	s := *r
	count := func(q int) int { return max((q+n-1)/n, 1) }
	rate := func(q float64) float64 { return math.Max(q/float64(n), math.Min(q, 1)) }
	switch r.Kind {
	case wire.KindTokenBucket:
		s.Rate, s.Burst = rate(r.Rate), count(r.Burst)
	case wire.KindGCRA:
		s.Rate = rate(r.Rate)
	case wire.KindSlidingWindow:
		s.Limit = count(r.Limit)
	case wire.KindConcurrency:
		s.Max = count(r.Max)
	case wire.KindAdaptive:
		s.Max = count(r.Max)
		s.Min = min(count(r.Min), s.Max)
	}
	return &s
}

// enforcement is the per-client state behind Client.Limiter: the handles,
// the cluster instance count and the enforcement metrics. It is created on
// the first Limiter call, so clients that enforce nothing pay nothing.
type enforcement struct {
	c        *Client
	mu       sync.Mutex // serializes handle creation and rebuilds
	limiters sync.Map   // resource -> *Limiter
	peers    atomic.Int64
	watching bool // watchPeers started; guarded by mu
	metrics  *enforceMetrics
	cpu      clientCPU
}

// clientCPU is the CPU meter system rules read by default: it starts
// sampling on its first read and stops when the client closes.
type clientCPU struct {
	c    *Client
	once sync.Once
	m    *limit.CPUMeter
}

// CPUUsage implements limit.CPUSource.
func (m *clientCPU) CPUUsage() float64 {
	m.once.Do(func() {
		m.m = limit.NewCPUMeter(nil)
		m.c.background(func() { m.m.Run(m.c.ctx, limit.DefaultCPUInterval) })
	})
	return m.m.CPUUsage()
}

func (c *Client) enforcement() *enforcement {
	c.enforceOnce.Do(func() {
		e := &enforcement{c: c}
		e.cpu.c = c
		e.peers.Store(1)
		e.metrics = newEnforceMetrics(e)
		if r := c.cfg.Registerer; r != nil {
			if err := r.Register(e.metrics); err != nil {
				c.log.Warn("enforcement metrics not registered", "err", err)
			} else {
				context.AfterFunc(c.ctx, func() { r.Unregister(e.metrics) })
			}
		}
		c.OnChange(func(ch Change) {
			if ch.Kind != LimitChanged {
				return
			}
			if l, ok := e.limiters.Load(ch.Name); ok {
				e.mu.Lock()
				e.refreshLocked(l.(*Limiter))
				e.mu.Unlock()
			}
		})
		c.enforce.Store(e)
	})
	return c.enforce.Load()
}

// refreshLocked rebuilds l's enforcer from the current rule and instance
// count; e.mu is held.
func (e *enforcement) refreshLocked(l *Limiter) {
	pub, ok := e.c.LimitRule(l.resource)
	if !ok {
		l.cur.Store(nil)
		return
	}
	if pub.Scope == wire.ScopeCluster && !e.watching && e.c.hasEtcd.Load() {
		e.watching = e.c.background(e.watchPeers)
	}
	rule := ClusterShare(pub, int(e.peers.Load()))
	old := l.cur.Load()
	next := &enforcer{
		rule:   rule,
		src:    pub,
		shadow: rule.Mode == wire.ModeShadow,
		slots:  rule.Kind == wire.KindConcurrency || rule.Kind == wire.KindAdaptive || rule.Kind == wire.KindSystem,
		queue:  rule.Kind == wire.KindConcurrency && rule.QueueTarget > 0,
	}
	next.hold = next.slots || rule.Kind == wire.KindBreaker || rule.Kind == wire.KindThrottle
	var err error
	if rule.KeyBy.Source != "" {
		next.header, next.ctxKey = rule.KeyBy.Name, rule.KeyBy.Source == "context"
		if old != nil && old.keyed != nil && old.rule.Kind == rule.Kind {
			next.keyed, err = old.keyed, old.keyed.Update(rule)
		} else {
			next.keyed, err = limit.NewKeyed(rule, l.clock, l.opts...)
		}
	} else {
		var prev limit.Limiter
		if old != nil {
			prev = old.lim
		}
		next.lim, err = limit.Update(prev, rule, l.clock, l.opts...)
		if rule.Reserve == 0 {
			next.tb, _ = next.lim.(*limit.TokenBucket) // no criticality to weigh
		}
		if !next.shadow {
			next.br, _ = next.lim.(*limit.Breaker)
		}
	}
	if err != nil || (next.lim == nil && next.keyed == nil) {
		// Published rules are validated by the client; a rule that still
		// fails keeps the previous enforcement.
		e.c.log.Warn("limit rule not applied, keeping the previous one", "resource", l.resource, "err", err)
		return
	}
	l.cur.Store(next)
}

// setPeers records the live instance count and rebuilds the cluster-scope
// limiters if it changed.
func (e *enforcement) setPeers(n int) {
	if n < 1 {
		n = 1
	}
	if e.peers.Swap(int64(n)) == int64(n) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.limiters.Range(func(_, v any) bool {
		l := v.(*Limiter)
		if r, ok := e.c.LimitRule(l.resource); ok && r.Scope == wire.ScopeCluster {
			e.refreshLocked(l)
		}
		return true
	})
}

// watchPeers keeps the live instance count of the app from the registry
// prefix: list, watch from the next revision, re-list after compaction or a
// broken watch. This instance always counts, registered yet or not. It
// runs on the client's wait group (see Client.background) until Close.
func (e *enforcement) watchPeers() {
	c := e.c
	ctx := c.ctx
	prefix := wire.AppPrefix(c.cfg.Namespace, wire.KindInstances, c.cfg.App)
	self := wire.InstanceKey(c.cfg.Namespace, c.cfg.App, c.cfg.InstanceID)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		set, rev, err := listPeers(ctx, c.etcd, prefix)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		backoff = 100 * time.Millisecond
		count := func() int {
			if _, ok := set[self]; ok {
				return len(set)
			}
			return len(set) + 1
		}
		e.setPeers(count())
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range c.etcd.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithKeysOnly()) {
			if wr.Err() != nil || wr.Canceled {
				break
			}
			changed := false
			for _, ev := range wr.Events {
				switch {
				case ev.Type == clientv3.EventTypeDelete:
					delete(set, string(ev.Kv.Key))
					changed = true
				case ev.IsCreate():
					set[string(ev.Kv.Key)] = struct{}{}
					changed = true
				}
				// A modification is an instance's ack: the set is the same.
			}
			if changed {
				e.setPeers(count())
			}
		}
		cancel()
	}
}

func listPeers(ctx context.Context, cli *clientv3.Client, prefix string) (map[string]struct{}, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, 0, err
	}
	set := make(map[string]struct{}, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		set[string(kv.Key)] = struct{}{}
	}
	return set, resp.Header.Revision, nil
}
