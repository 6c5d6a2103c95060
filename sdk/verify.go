package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchyard-io/switchyard/sdk/verifyschema"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// This file is shadow verification: while an L1 or L2 switch is off, a
// sampled safe request also runs the degraded path, off the caller's path
// and with a hard timeout, and its answer is compared by shape with the
// live one and thrown away. A fallback that rotted since the last drill
// shows up as mismatches in the fleet signals before an incident needs it.
//
// The degraded run sees the switch on: its context carries the run, and
// while a run of a switch is in flight the switch's read flag is held at
// 0, so every check of the switch takes Handle.slowOn, which answers on
// for that context only. Checks outside the run answer as before.

// maxVerifyBody bounds the live and the degraded body kept for a
// comparison; a larger live answer is not compared.
const maxVerifyBody = 1 << 20

// verifySignals are the shadow-verification state and counters of one
// switch name.
type verifySignals struct {
	nextAt   atomic.Int64 // unix nanoseconds when the next sample may be taken
	busy     atomic.Bool  // a degraded run is still executing
	inflight atomic.Int32 // degraded runs not yet finished nor abandoned

	match, mismatch, errs, timeouts atomic.Uint64
	lastMatch, lastMismatch         atomic.Int64 // unix seconds
	latency                         [latencyBuckets]atomic.Uint64

	mu        sync.Mutex
	diffs     []string           // of the last mismatch
	schemaRaw []byte             // the verify schema compiled into schema
	schema    *jsonschema.Schema // nil: none, or it did not compile
	compiles  int                // schemas compiled so far: one per distinct schema
}

// compiledSchema returns the switch's verify schema compiled, nil without
// one. It compiles only when the schema differs from the last one it
// compiled, so once per schema revision and never per sample. A schema
// that does not compile (the console refuses one) checks nothing.
func (v *verifySignals) compiledSchema(spec *wire.Verify) *jsonschema.Schema {
	if spec == nil || len(spec.Schema) == 0 {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.compiles == 0 || !bytes.Equal(v.schemaRaw, spec.Schema) {
		v.schema, _ = verifyschema.Compile(spec.Schema)
		v.schemaRaw = spec.Schema
		v.compiles++
	}
	return v.schema
}

// signal reads the counters; nil when nothing was sampled.
func (v *verifySignals) signal() *wire.VerifySignal {
	s := &wire.VerifySignal{
		Match: v.match.Load(), Mismatch: v.mismatch.Load(), Error: v.errs.Load(), Timeout: v.timeouts.Load(),
		LastMatch: v.lastMatch.Load(), LastMismatch: v.lastMismatch.Load(),
	}
	if s.Match+s.Mismatch+s.Error+s.Timeout == 0 {
		return nil
	}
	for i := range v.latency {
		if n := v.latency[i].Load(); n > 0 {
			if s.Latency == nil {
				s.Latency = make([]uint64, latencyBuckets)
			}
			s.Latency[i] = n
		}
	}
	v.mu.Lock()
	s.Diffs = v.diffs
	v.mu.Unlock()
	return s
}

type verifyCtxKey struct{}

// verifying reports whether ctx belongs to a degraded run of the switch
// whose signals are s.
func verifying(ctx context.Context, s *switchSignals) bool {
	v, _ := ctx.Value(verifyCtxKey{}).(*verifySignals)
	return v != nil && v == s.verify.Load()
}

// verifyRun is one sample of a switch: the live answer and the switch
// value it was taken under.
type verifyRun struct {
	sig *switchSignals
	v   *verifySignals // sig's
	sw  *wire.Switch
}

// sampleVerify takes a sample of the switch at now (unix nanoseconds) when
// its token is due, the switch is a published L1 or L2 switch that is off
// and does not disable verification, and no earlier run of it still
// executes. Until the token is due it costs two atomic loads; an
// ineligible switch also spends the token, so it is looked at once per
// period.
func (h *Handle) sampleVerify(now int64) *verifyRun {
	v := h.sig.verifyState()
	next := v.nextAt.Load()
	if now < next {
		return nil
	}
	var sw *wire.Switch
	var spec *wire.Verify
	if e := h.entry(); e != nil {
		sw, spec = e.sw, e.sw.Verify
	}
	if !v.nextAt.CompareAndSwap(next, now+int64(spec.Period())) { // Period is nil-safe
		return nil
	}
	if sw == nil || sw.State != wire.StateOff || (sw.Level != wire.L1 && sw.Level != wire.L2) ||
		(spec != nil && spec.Disabled) {
		return nil
	}
	if !v.busy.CompareAndSwap(false, true) {
		return nil
	}
	return &verifyRun{sig: h.sig, v: v, sw: sw}
}

// release ends a sample that will not run.
func (r *verifyRun) release() { r.v.busy.Store(false) }

// errDegradedStatus is a degraded answer of status 500 or above.
var errDegradedStatus = errors.New("sdk: degraded answer 5xx")

// answer is one side of a comparison: an HTTP status (0 outside HTTP)
// and a JSON body.
type answer struct {
	status int
	body   []byte
}

// shadow runs degraded under a context that sees the switch on, marked
// degraded at its level, without the caller's cancellation and with the
// switch's timeout, and records how its answer compares with live. When
// the shapes differ, again (the live path once more) tells which
// differences are noise: those between two live answers. It runs on its
// own goroutine and never panics. A run past its timeout is counted at
// once and abandoned; the switch is sampled again only after the
// abandoned run returns, so a hanging degraded path holds at most one
// goroutine per switch.
func (r *verifyRun) shadow(parent context.Context, live answer, degraded, again func(context.Context) (answer, error)) {
	v := r.v
	defer v.busy.Store(false)
	limit := r.sw.Verify.Limit()
	parent = context.WithoutCancel(parent)
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	ctx = WithDegraded(context.WithValue(ctx, verifyCtxKey{}, v), r.sw.Level)

	var state atomic.Int32 // 0 running, 1 finished, 2 abandoned
	v.inflight.Add(1)
	atomic.StoreUint32(&r.sig.read, 0) // every check of the switch now takes slowOn
	timer := time.AfterFunc(limit, func() {
		if state.CompareAndSwap(0, 2) {
			v.inflight.Add(-1)
			v.timeouts.Add(1)
		}
	})
	start := time.Now()
	got, err := call(ctx, degraded)
	took := time.Since(start)
	if !state.CompareAndSwap(0, 1) {
		return
	}
	timer.Stop()
	v.inflight.Add(-1)
	v.latency[latencyBucket(took)].Add(1)
	if err != nil {
		v.errs.Add(1)
		return
	}
	diffs := r.diffs(live, got, v.compiledSchema(r.sw.Verify), wire.MaxVerifyDiffs)
	if len(diffs) > 0 && again != nil {
		actx, cancel := context.WithTimeout(parent, limit)
		if live2, err := call(actx, again); err == nil {
			diffs = withoutNoise(diffs, r.diffs(live, live2, nil, 4*wire.MaxVerifyDiffs))
		}
		cancel()
	}
	r.record(diffs)
}

// call calls fn, turning a panic and a 5xx answer into errors.
func call(ctx context.Context, fn func(context.Context) (answer, error)) (a answer, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sdk: panicked: %v", p)
		}
	}()
	a, err = fn(ctx)
	if err == nil && a.status >= http.StatusInternalServerError {
		err = errDegradedStatus
	}
	return a, err
}

// diffs compares an answer with the live one, and with schema when not
// nil, at most limit differences.
func (r *verifyRun) diffs(live, other answer, schema *jsonschema.Schema, limit int) []shapeDiff {
	var out []shapeDiff
	if live.status != other.status {
		out = append(out, shapeDiff{"(status)", fmt.Sprintf("%d, degraded %d", live.status, other.status)})
	}
	lv, _ := decodeJSON(live.body) // checked before the run
	ov, ok := decodeJSON(other.body)
	if !ok {
		return append(out, shapeDiff{"", "JSON, degraded not JSON"})
	}
	var required []wire.Pointer
	if r.sw.Verify != nil {
		for _, f := range r.sw.Verify.RequiredFields {
			if p, err := wire.ParsePointer(f); err == nil {
				required = append(required, p)
			}
		}
	}
	out = append(out, shapeDiffs(lv, ov, required, limit)...)
	return append(out, schemaDiffs(schema, ov, limit-len(out))...)
}

// record counts a match (no differences) or a mismatch, whose
// differences it keeps.
func (r *verifyRun) record(diffs []shapeDiff) {
	v := r.v
	now := time.Now().Unix()
	if len(diffs) == 0 {
		v.match.Add(1)
		v.lastMatch.Store(now)
		return
	}
	shown := make([]string, 0, min(len(diffs), wire.MaxVerifyDiffs))
	for _, d := range diffs[:min(len(diffs), wire.MaxVerifyDiffs)] {
		shown = append(shown, d.String())
	}
	v.mu.Lock()
	v.diffs = shown
	v.mu.Unlock()
	v.mismatch.Add(1)
	v.lastMismatch.Store(now)
}

// Verify runs live and returns its result, unchanged. On a sampled call
// (see MiddlewareOptions.Verify: about one per the switch's verify period
// per instance, while the L1 or L2 switch of h is off) it then runs
// degraded on another goroutine, under a context in which h.On answers on,
// with the switch's timeout, compares the two results marshaled to JSON by
// shape and throws degraded's away; the outcome counts in the switch's
// fleet signals. On a difference live runs once more there, and what two
// live results disagree on is noise, not a mismatch. A panic, an error or a timeout of degraded is counted,
// never returned. When live fails nothing is compared.
//
// Like GitHub's Scientist, it is for code without side effects: degraded
// runs in addition to live, not instead of it.
func Verify[T any](ctx context.Context, h *Handle, live, degraded func(context.Context) (T, error)) (T, error) {
	run := h.sampleVerify(time.Now().UnixNano())
	v, err := live(ctx)
	if run == nil {
		return v, err
	}
	body, merr := json.Marshal(v)
	if err != nil || merr != nil {
		run.release()
		return v, err
	}
	marshaled := func(fn func(context.Context) (T, error)) func(context.Context) (answer, error) {
		return func(ctx context.Context) (answer, error) {
			d, err := fn(ctx)
			if err != nil {
				return answer{}, err
			}
			b, err := json.Marshal(d)
			return answer{body: b}, err
		}
	}
	go run.shadow(ctx, answer{body: body}, marshaled(degraded), marshaled(live))
	return v, err
}

// shadowHTTP runs next a second time, into a recorder, for a clone of a
// sampled GET or HEAD request whose live answer (status, body) was
// captured.
func (r *verifyRun) shadowHTTP(next http.Handler, req *http.Request, status int, body []byte) {
	if status < 200 || status > 299 {
		r.release() // only a successful live answer has a shape to keep
		return
	}
	if _, ok := decodeJSON(body); !ok {
		r.release()
		return
	}
	serve := func(ctx context.Context) (answer, error) {
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		shadowReq := req.WithContext(ctx)
		shadowReq.Body = http.NoBody
		next.ServeHTTP(rec, shadowReq)
		return answer{status: rec.status, body: rec.body.Bytes()}, nil
	}
	r.shadow(req.Context(), answer{status: status, body: body}, serve, serve)
}

// recorder is the ResponseWriter of a degraded run: it keeps the status
// and up to maxVerifyBody of the body.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   capBuffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

// capBuffer keeps the first maxVerifyBody bytes written to it; over
// records that more were written.
type capBuffer struct {
	bytes.Buffer
	over bool
}

func (c *capBuffer) Write(b []byte) (int, error) {
	n := len(b)
	if room := maxVerifyBody - c.Len(); n > room {
		c.over = true
		b = b[:max(room, 0)]
	}
	c.Buffer.Write(b)
	return n, nil
}
