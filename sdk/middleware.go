package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Rejection reasons. They are a fixed vocabulary, used in problem documents,
// gRPC status messages and metric labels; never user input.
const (
	ReasonRateLimited            = "rate_limited"        // a rate rule rejected (429)
	ReasonConcurrencyLimited     = "concurrency_limited" // a concurrency or adaptive rule rejected (429)
	ReasonBreakerOpen            = "breaker_open"        // the resource's circuit breaker is open (503)
	ReasonThrottled              = "throttled"           // client-side throttling refused an outbound call (never sent)
	ReasonOverloaded             = "overloaded"          // system protection: CPU high and in-flight work above capacity (503)
	ReasonQueueTimeout           = "queue_timeout"       // waited too long for a slot in a CoDel queue (503)
	ReasonReadOnly               = "read_only"           // an L4 switch is on and the request writes (503)
	ReasonQueueUnavailable       = "queue_unavailable"   // an L5 switch is on but writes cannot be queued here (503)
	ReasonEnqueueFailed          = "enqueue_failed"      // the Enqueuer could not queue the write (503)
	ReasonInvalidWrite           = "invalid_write"       // the Enqueuer refused the write as malformed (400, ErrInvalidWrite)
	ReasonIdempotencyKeyRequired = "idempotency_key_required"
	ReasonIdempotencyKeyInvalid  = "idempotency_key_invalid"
)

// Verdict is what a Guard decided for a request.
type Verdict uint8

// Verdicts.
const (
	Proceed Verdict = iota // serve the request (Entry.Level says whether degraded)
	Reject                 // answer with Entry.Reason; do not serve
	Queue                  // an L5 write: hand it to the service's queue, answer 202
)

// Guard applies limit rules and degradation switches to requests of any
// transport; the net/http middleware, ginx and grpcx are built on it.
//
// The switches named act by their published level while they are on for
// the request: any level marks the request degraded (WithDegraded with the
// highest level on), L4 (read_only) rejects writes, L5 (queue_writes) turns
// writes into Queue. When both are on, L4 wins: no write is accepted.
// Reads always proceed. An L4 switch with a warm_up that turned off keeps
// rejecting a falling share of writes over its warm_up (warmup.go).
//
// A request's criticality (WithCriticality, or the CriticalityHeader the
// guard reads from h) decides who is shed first by rules with a reserve;
// a concurrency rule with a CoDel queue makes the request wait for a slot.
type Guard struct {
	c          *Client
	e          *enforcement
	switches   []*Handle
	critHeader string
}

// Guard returns a guard acting on the given switches (see Guard).
func (c *Client) Guard(switches ...*Handle) *Guard {
	return &Guard{c: c, e: c.enforcement(), switches: switches, critHeader: CriticalityHeader}
}

// WithCriticalityHeader returns a copy of the guard that reads request
// criticality from the named header (or gRPC metadata key) instead of
// CriticalityHeader; "" reads none.
func (g *Guard) WithCriticalityHeader(name string) *Guard {
	c := *g
	c.critHeader = name
	return &c
}

// Entry is one request inside a Guard. Call Exit exactly once when the
// request is over, whatever the verdict.
type Entry struct {
	Verdict Verdict
	// Reason is set for Reject: one of the Reason constants.
	Reason string
	// RetryAfter is, for a limiter rejection, when to try again (0: unknown).
	RetryAfter time.Duration
	// Wait is how long a GCRA rule asks the request to wait before it
	// proceeds.
	Wait time.Duration
	// Level is the highest level of a switch on for the request, "" when the
	// request is not degraded.
	Level wire.Level

	permit Permit
	g      *Guard
	start  time.Time
	on     switchSet // the guard's switches that were on for the request
}

// switchSet is a set of indexes into a Guard's switches; it allocates only
// for a guard of more than 64 switches.
type switchSet struct {
	low  uint64
	high []uint64
}

func (s *switchSet) add(i int) {
	if i < 64 {
		s.low |= 1 << i
		return
	}
	w := i/64 - 1
	for len(s.high) <= w {
		s.high = append(s.high, 0)
	}
	s.high[w] |= 1 << (i % 64)
}

func (s *switchSet) has(i int) bool {
	if i < 64 {
		return s.low&(1<<i) != 0
	}
	w := i/64 - 1
	return w < len(s.high) && s.high[w]&(1<<(i%64)) != 0
}

// Enter decides one request for resource. h supplies header keys for
// key_by rules (nil if none); write says whether the request changes state.
// The returned context carries the degraded level when there is one.
func (g *Guard) Enter(ctx context.Context, resource string, h Headers, write bool) (context.Context, Entry) {
	en := Entry{g: g, start: time.Now()}
	ctx = criticalityIn(ctx, h, g.critHeader)
	var l4, l5 bool
	for i, s := range g.switches {
		if !s.On(ctx) {
			continue
		}
		en.on.add(i)
		lv := s.Level()
		if lv.Rank() > en.Level.Rank() {
			en.Level = lv
		}
		l4 = l4 || lv == wire.L4
		l5 = l5 || lv == wire.L5
	}
	// An L4 write is refused before the limiter: it costs no token and
	// says what is going on; so is one an L4 warm-up holds back.
	// Queued (L5) writes are still limited.
	if write && (l4 || g.heldBack()) {
		en.Verdict, en.Reason, en.Level = Reject, ReasonReadOnly, wire.L4
		return WithDegraded(ctx, en.Level), en
	}
	if _, ok := g.c.LimitRule(resource); ok {
		l := g.c.Limiter(resource)
		var p Permit
		var d limit.Decision
		if l.Queues() {
			p, d = l.acquireDecision(ctx, h)
		} else {
			p, d = l.AdmitHeaders(ctx, h)
		}
		if !d.OK {
			en.Verdict, en.Reason, en.RetryAfter, en.Level = Reject, d.Reason.String(), d.RetryAfter, ""
			return ctx, en
		}
		en.permit, en.Wait = p, d.Wait
	}
	if en.Level == "" {
		return ctx, en
	}
	if write && l5 {
		en.Verdict, en.Level = Queue, wire.L5
	}
	return WithDegraded(ctx, en.Level), en
}

// Exit ends the request: it finishes the limiter permit with ok (false
// counts as a failure for breaker and adaptive rules) and records the
// latency and the degraded action. The latency of a degraded request also
// counts in the fleet signals of every switch that was on for it.
func (en *Entry) Exit(ok bool) {
	en.permit.Finish(ok)
	if en.g == nil || (en.Level == "" && en.Verdict == Reject) {
		return // limiter rejections are neither path
	}
	m := en.g.e.metrics
	took := time.Since(en.start)
	m.observe(en.Level, took.Seconds())
	if en.Level == "" {
		return
	}
	for i, s := range en.g.switches {
		if en.on.has(i) {
			s.sig.observe(took)
		}
	}
	action := "served"
	switch {
	case en.Verdict == Reject:
		action = "rejected"
	case en.Verdict == Queue && ok:
		action = "queued"
	case en.Verdict == Queue:
		action = "rejected"
	}
	m.served.WithLabelValues(string(en.Level), action).Inc()
}

// Holds reports whether the request holds a limiter slot whose outcome
// matters (concurrency, adaptive and breaker rules), so the caller should
// report success or failure to Exit.
func (en *Entry) Holds() bool { return en.permit.Holds() }

// Delay waits the Wait a GCRA rule asked for. If ctx ends first it exits
// the entry and returns ctx's error: the request must not proceed.
func (en *Entry) Delay(ctx context.Context) error {
	if err := limit.Sleep(ctx, en.Wait); err != nil {
		en.Exit(true)
		return err
	}
	return nil
}

// Enqueuer receives L5 writes. Enqueue is called at most once per
// (resource, Idempotency-Key) while the middleware remembers the key (up to
// IdempotencyTTL, fewer when IdempotencyMaxKeys newer keys push it out);
// concurrent duplicates wait for that one call and share its result. It
// runs inside the request, so it may read w.Request.Body; its context is
// the request's without cancellation. A nil error means the write is
// durably queued and the client gets 202; an error wrapping ErrInvalidWrite
// gets 400 invalid_write (validate the write before queueing it), any other
// 503 enqueue_failed. Either way the key is not remembered, so a corrected
// retry is queued.
type Enqueuer interface {
	Enqueue(ctx context.Context, w QueuedWrite) error
}

// ErrInvalidWrite is what an Enqueuer wraps to refuse a malformed write:
// the client gets 400 with reason invalid_write (the error's text is
// logged by the service if at all, never sent: reasons are a fixed
// vocabulary).
var ErrInvalidWrite = errors.New("sdk: invalid write")

// EnqueuerFunc adapts a function to Enqueuer.
type EnqueuerFunc func(ctx context.Context, w QueuedWrite) error

// Enqueue implements Enqueuer.
func (f EnqueuerFunc) Enqueue(ctx context.Context, w QueuedWrite) error { return f(ctx, w) }

// QueuedWrite is a write handed to an Enqueuer.
type QueuedWrite struct {
	// Key is the client's Idempotency-Key.
	Key string
	// Resource is the guarded resource ("POST /orders").
	Resource string
	// Request is the HTTP request; read its body inside Enqueue.
	Request *http.Request
}

// MiddlewareOptions configure the net/http middleware. The zero value
// enforces limit rules by route and acts on no switch.
type MiddlewareOptions struct {
	// Switches are the degradation switches acting on the wrapped handlers
	// by their published level (see Guard): typically the app's L4 and L5
	// switches, e.g. client.Switch("db-readonly"), client.Switch("orders-queue").
	Switches []*Handle
	// Resource names a request's resource. Default RouteResource.
	Resource func(*http.Request) string
	// Mux, when the middleware wraps a whole ServeMux (so r.Pattern is not
	// yet set), resolves the route pattern the mux will pick.
	Mux *http.ServeMux
	// Enqueuer receives L5 writes. Without it an L5 write gets 503
	// queue_unavailable: writes fail explicitly rather than vanish.
	Enqueuer Enqueuer
	// IdempotencyTTL is how long an accepted key is remembered. Default 24h.
	IdempotencyTTL time.Duration
	// IdempotencyMaxKeys bounds the remembered keys (oldest dropped first).
	// Default 100,000.
	IdempotencyMaxKeys int
	// Verify are L1 and L2 switches the wrapped handlers read, to verify
	// while they are off (shadow verification): about once per switch's
	// verify period (default 10s) per instance, a GET or HEAD request
	// whose live answer is a 2xx JSON document is served again, after the
	// caller got the live answer, on another goroutine, with the switch on
	// for that run only and a hard timeout (default 1s); the two answers
	// are compared by shape (JSON types, key sets, the switch's
	// required_fields; on a difference the request is served live once
	// more, and what two live answers disagree on is noise) and the
	// degraded one is thrown away. Matches,
	// mismatches, errors, timeouts and the degraded path's latency count
	// in the switch's fleet signals. Only list switches whose GET and HEAD
	// handlers have no side effects: they run twice on a sample. Handler
	// acts on it; guards used through Enter and Exit (sdk/ginx) do not
	// sample: wrap the call in Verify there.
	Verify []*Handle
	// CriticalityHeader names the header carrying a request's criticality.
	// Default CriticalityHeader ("X-Criticality"); "-" reads none.
	CriticalityHeader string
}

// HTTPGuard is the net/http form of a Guard: it writes the rejections and
// the L5 answers itself. Use Handler as middleware, or Enter/Exit from
// another router's middleware (see sdk/ginx).
type HTTPGuard struct {
	g        *Guard
	opts     MiddlewareOptions
	resource func(*http.Request) string
	idem     *dedupe
	verify   []*Handle
}

// HTTPGuard returns the guard behind Middleware.
func (c *Client) HTTPGuard(opts MiddlewareOptions) *HTTPGuard {
	h := &HTTPGuard{g: c.Guard(opts.Switches...), opts: opts, resource: opts.Resource, verify: opts.Verify}
	switch opts.CriticalityHeader {
	case "":
	case "-":
		h.g = h.g.WithCriticalityHeader("")
	default:
		h.g = h.g.WithCriticalityHeader(opts.CriticalityHeader)
	}
	if h.resource == nil {
		h.resource = RouteResource
		if mux := opts.Mux; mux != nil {
			h.resource = func(r *http.Request) string {
				if r.Pattern == "" {
					if _, p := mux.Handler(r); p != "" {
						return patternResource(r.Method, p)
					}
				}
				return RouteResource(r)
			}
		}
	}
	ttl := opts.IdempotencyTTL
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	n := opts.IdempotencyMaxKeys
	if n <= 0 {
		n = 100_000
	}
	h.idem = newDedupe(ttl, n)
	return h
}

// Middleware returns net/http middleware that guards every request:
//
//   - the limit rule of the request's resource (see RouteResource): a
//     rejection is 429 (503 for an open breaker, overloaded or
//     queue_timeout) with Retry-After in whole
//     seconds (at least 1) and an application/problem+json body
//     {type, title, status, reason};
//   - L4 switch on: writes (every method but GET, HEAD, OPTIONS, TRACE) get
//     503 reason read_only, never a 2xx; reads are served;
//   - L5 switch on: writes need an Idempotency-Key header (400 reason
//     idempotency_key_required otherwise), are handed once per key to the
//     Enqueuer and answered 202 {"status":"queued","idempotency_key":…};
//   - a degraded request reaches the handler with its level in the context
//     (DegradedLevel).
//
// An L4 write is refused before the limiter is asked; L5 writes are limited
// like any request before they are queued. A breaker or adaptive rule counts
// a 5xx answer or a panic as a failure.
func (c *Client) Middleware(opts MiddlewareOptions) func(http.Handler) http.Handler {
	return c.HTTPGuard(opts).Handler
}

// Handler wraps next.
func (h *HTTPGuard) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, en, ok := h.Enter(w, r, h.resource(r))
		if !ok {
			return
		}
		run := h.sampleVerify(r, &en)
		if !en.Holds() && run == nil {
			defer en.Exit(true)
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		if run != nil {
			sw.capture = &capBuffer{}
		}
		done := false
		defer func() {
			if !done {
				en.Exit(false) // panic
				if run != nil {
					run.release()
				}
			}
		}()
		next.ServeHTTP(sw, r)
		done = true
		en.Exit(sw.status < 500)
		if run != nil {
			if sw.capture.over {
				run.release()
				return
			}
			// The clone is taken before the handler returns the request
			// to the server.
			go run.shadowHTTP(next, r.Clone(r.Context()), sw.status, sw.capture.Bytes())
		}
	})
}

// sampleVerify takes a shadow-verification sample of the first Verify
// switch that is due (see MiddlewareOptions.Verify), nil for most
// requests: those not GET or HEAD, already degraded, or between samples.
func (h *HTTPGuard) sampleVerify(r *http.Request, en *Entry) *verifyRun {
	if len(h.verify) == 0 || (r.Method != http.MethodGet && r.Method != http.MethodHead) || en.Level != "" {
		return nil
	}
	now := en.start.UnixNano()
	for _, s := range h.verify {
		if run := s.sampleVerify(now); run != nil {
			return run
		}
	}
	return nil
}

// Enter guards one request for resource. When it returns false the answer
// (rejection or L5 202) is written and the request is over; otherwise serve
// the returned request (its context carries the degraded level) and call
// en.Exit with whether the answer was a success (status below 500).
func (h *HTTPGuard) Enter(w http.ResponseWriter, r *http.Request, resource string) (_ *http.Request, en Entry, proceed bool) {
	ctx, en := h.g.Enter(r.Context(), resource, r.Header, isWrite(r.Method))
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	switch en.Verdict {
	case Reject:
		WriteProblem(w, en.Reason, en.RetryAfter)
		en.Exit(true)
		return r, en, false
	case Queue:
		if reason := h.queue(w, r, resource); reason != "" {
			// Not queued: the client got a problem document, which counts
			// for the resource's breaker like any answer would, a failure
			// only if it is a 5xx (a missing Idempotency-Key is not).
			en.Verdict, en.Reason = Reject, reason
			en.Exit(ProblemFor(reason).Status < http.StatusInternalServerError)
			return r, en, false
		}
		en.Exit(true)
		return r, en, false
	}
	if en.Delay(ctx) != nil {
		// The request ended before the wait the rule asked for: it did not
		// run, so it must not look like a success.
		WriteProblem(w, ReasonRateLimited, en.Wait)
		return r, en, false
	}
	return r, en, true
}

// queue answers an L5 write: 202 when it is queued, otherwise the problem
// document of the reason it returns.
func (h *HTTPGuard) queue(w http.ResponseWriter, r *http.Request, resource string) (reason string) {
	defer func() {
		if reason != "" {
			WriteProblem(w, reason, 0)
		}
	}()
	key := r.Header.Get("Idempotency-Key")
	switch {
	case key == "":
		return ReasonIdempotencyKeyRequired
	case !validIdempotencyKey(key):
		return ReasonIdempotencyKeyInvalid
	case h.opts.Enqueuer == nil:
		return ReasonQueueUnavailable
	}
	err := h.idem.do(r.Context(), resource+"\x00"+key, func() error {
		return h.opts.Enqueuer.Enqueue(context.WithoutCancel(r.Context()), QueuedWrite{Key: key, Resource: resource, Request: r})
	})
	switch {
	case errors.Is(err, ErrInvalidWrite):
		return ReasonInvalidWrite
	case err != nil:
		return ReasonEnqueueFailed
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Idempotency-Key", key)
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(struct {
		Status string `json:"status"`
		Key    string `json:"idempotency_key"`
	}{"queued", key})
	return ""
}

// validIdempotencyKey accepts 1–255 printable ASCII characters.
func validIdempotencyKey(k string) bool {
	if len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// isWrite reports whether an HTTP method may change state: everything but
// the safe methods of RFC 9110.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// RouteResource is the default resource of a request: the ServeMux route
// pattern when the request was routed by one (r.Pattern, Go 1.22+), as
// "METHOD pattern" ("POST /orders/{id}"); otherwise "METHOD path".
//
// Only resources with a published rule get a Limiter and metric series, so
// raw paths with ids in them cost nothing unless a rule names them.
func RouteResource(r *http.Request) string {
	if r.Pattern != "" {
		return patternResource(r.Method, r.Pattern)
	}
	return r.Method + " " + r.URL.Path
}

// patternResource prefixes a pattern without a method with the request's.
func patternResource(method, pattern string) string {
	if i := strings.IndexAny(pattern, " /"); i > 0 && pattern[i] == ' ' {
		return pattern
	}
	return method + " " + pattern
}

// Problem is the application/problem+json body of a rejection.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Reason string `json:"reason"`
}

var problems = map[string]Problem{
	ReasonRateLimited:            {Title: "Too many requests", Status: http.StatusTooManyRequests},
	ReasonConcurrencyLimited:     {Title: "Too many concurrent requests", Status: http.StatusTooManyRequests},
	ReasonBreakerOpen:            {Title: "Dependency unavailable (circuit breaker open)", Status: http.StatusServiceUnavailable},
	ReasonThrottled:              {Title: "Dependency overloaded: call throttled by the client", Status: http.StatusServiceUnavailable},
	ReasonOverloaded:             {Title: "Service overloaded", Status: http.StatusServiceUnavailable},
	ReasonQueueTimeout:           {Title: "Service overloaded: request waited too long for capacity", Status: http.StatusServiceUnavailable},
	ReasonReadOnly:               {Title: "Service is read-only: writes are disabled", Status: http.StatusServiceUnavailable},
	ReasonQueueUnavailable:       {Title: "Writes are being queued but this endpoint cannot queue them", Status: http.StatusServiceUnavailable},
	ReasonEnqueueFailed:          {Title: "The write could not be queued", Status: http.StatusServiceUnavailable},
	ReasonInvalidWrite:           {Title: "The write is malformed and was not queued", Status: http.StatusBadRequest},
	ReasonIdempotencyKeyRequired: {Title: "Writes are being queued: an Idempotency-Key header is required", Status: http.StatusBadRequest},
	ReasonIdempotencyKeyInvalid:  {Title: "Idempotency-Key must be 1-255 printable ASCII characters", Status: http.StatusBadRequest},
}

// ProblemFor returns the problem document of a reason; an unknown reason
// maps to a 503 with reason "unavailable".
func ProblemFor(reason string) Problem {
	p, ok := problems[reason]
	if !ok {
		p, reason = Problem{Title: "Service unavailable", Status: http.StatusServiceUnavailable}, "unavailable"
	}
	p.Type, p.Reason = "/problems/"+reason, reason
	return p
}

// WriteProblem writes the rejection of a reason: its status, a
// Retry-After header in whole seconds (rounded up, at least 1) for every 429
// and breaker_open answer and for any other whose retryAfter is known, and
// the problem document.
func WriteProblem(w http.ResponseWriter, reason string, retryAfter time.Duration) {
	p := ProblemFor(reason)
	hd := w.Header()
	hd.Set("Content-Type", "application/problem+json")
	// A half-open breaker whose probes are all taken does not know when it
	// will close: Retry-After is then the 1 s minimum.
	if p.Status == http.StatusTooManyRequests || reason == ReasonBreakerOpen || reason == ReasonOverloaded || reason == ReasonQueueTimeout || retryAfter > 0 {
		hd.Set("Retry-After", strconv.Itoa(RetryAfterSeconds(retryAfter)))
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// RetryAfterSeconds rounds d up to whole seconds, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// statusWriter records the status code for breaker and adaptive outcomes
// and, on a shadow-verification sample, the live body.
type statusWriter struct {
	http.ResponseWriter
	status  int
	wrote   bool
	capture *capBuffer // a copy of the body for shadow verification, or nil
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	if s.capture != nil {
		s.capture.Write(b)
	}
	return s.ResponseWriter.Write(b)
}

// Flush keeps streaming handlers (server-sent events, token streams) that
// assert http.Flusher working behind a concurrency, adaptive or breaker rule.
func (s *statusWriter) Flush() {
	s.wrote = true
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// dedupe runs a function once per key: concurrent callers with the same
// key wait for the first call and share its result; a success is
// remembered for ttl, a failure is forgotten so a retry calls again. At most
// max keys are remembered, the oldest finished one dropped first (writes
// still being enqueued are never dropped). It is per process: a retry that
// reaches another instance calls its Enqueuer again, so the service's queue
// consumer must also be idempotent on the key.
type dedupe struct {
	mu    sync.Mutex
	ttl   time.Duration
	max   int
	m     map[string]*flight
	order []flightRef // insertion order, oldest first

	// testHookWait, when set, is called as a duplicate starts waiting for
	// an unfinished call of its key.
	testHookWait func(key string)
}

type flight struct {
	done chan struct{}
	err  error
	at   time.Time
}

type flightRef struct {
	key string
	f   *flight
}

func newDedupe(ttl time.Duration, max int) *dedupe {
	return &dedupe{ttl: ttl, max: max, m: map[string]*flight{}}
}

func (d *dedupe) do(ctx context.Context, key string, fn func() error) error {
	now := time.Now()
	d.mu.Lock()
	// Forget the oldest keys past their TTL or beyond the cap, but never a
	// write still being enqueued (its duplicates must wait for it); entries
	// of failed writes, already gone from the map, are simply dropped.
	_, present := d.m[key]
	for len(d.order) > 0 {
		old := d.order[0]
		live := d.m[old.key] == old.f
		full := !present && len(d.m) >= d.max // room is needed for a new key
		if live && (!old.f.finished() || (now.Sub(old.f.at) <= d.ttl && !full)) {
			break
		}
		d.order[0] = flightRef{}
		d.order = d.order[1:]
		if live {
			delete(d.m, old.key)
		}
	}
	if f, ok := d.m[key]; ok {
		hook := d.testHookWait
		d.mu.Unlock()
		if hook != nil && !f.finished() {
			hook(key)
		}
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// Failed writes leave stale refs behind a live head; drop them before
	// they outnumber the live keys, or an Enqueuer outage with clients
	// retrying would grow the order without bound.
	if len(d.order) > 2*len(d.m)+16 {
		live := d.order[:0]
		for _, o := range d.order {
			if d.m[o.key] == o.f {
				live = append(live, o)
			}
		}
		clear(d.order[len(live):])
		d.order = live
	}
	f := &flight{done: make(chan struct{}), at: now}
	d.m[key] = f
	d.order = append(d.order, flightRef{key, f})
	d.mu.Unlock()

	defer func() {
		if f.err != nil {
			d.mu.Lock()
			if d.m[key] == f {
				delete(d.m, key)
			}
			d.mu.Unlock()
		}
		close(f.done)
	}()
	f.err = errEnqueuePanic
	f.err = fn()
	return f.err
}

// finished reports whether the flight's Enqueue call has returned.
func (f *flight) finished() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// errEnqueuePanic is the result shared with duplicates when the Enqueuer
// panics.
var errEnqueuePanic = errors.New("sdk: enqueuer panicked")
