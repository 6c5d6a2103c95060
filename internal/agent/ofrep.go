package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// This file serves the OpenFeature Remote Evaluation Protocol (OFREP,
// spec v0.3.0) on the agent's second listener, so that a service in any
// language evaluates switches with its ecosystem's OFREP provider. The
// mapping, and the reason for each choice, is in docs/agent.md.

// FallbackSuffix turns a switch name into the key of its companion flag,
// whose object value is the switch's L1 fallback payload. ":" cannot occur
// in a switch name, so the companion never shadows a switch.
const FallbackSuffix = ":fallback"

// MaxOFREPBody bounds an OFREP request body; larger ones answer 413.
const MaxOFREPBody = 1 << 20

// OFREP reasons and error codes used by the agent.
const (
	reasonStatic   = "STATIC"
	reasonSplit    = "SPLIT"
	reasonTargeted = "TARGETING_MATCH"
	reasonDisabled = "DISABLED"

	codeParse         = "PARSE_ERROR"
	codeInvalid       = "INVALID_CONTEXT"
	codeFlagNotFound  = "FLAG_NOT_FOUND"
	codeGeneral       = "GENERAL"
	outcomeTooLarge   = "too_large"
	outcomeLimited    = "rate_limited"
	outcomeDenied     = "unauthorized"
	outcomeNotChanged = "not_modified"
)

// ofrepEvaluation is a successful evaluation (evaluationSuccess). Value is
// always present and typed: a boolean for a switch, the payload for its
// fallback companion.
type ofrepEvaluation struct {
	Key      string        `json:"key"`
	Value    any           `json:"value"`
	Reason   string        `json:"reason"`
	Variant  string        `json:"variant"`
	Metadata ofrepMetadata `json:"metadata"`
}

// ofrepMetadata is the flat flag metadata of an answer.
type ofrepMetadata struct {
	Level   wire.Level `json:"level,omitempty"`
	State   string     `json:"state,omitempty"`
	Version int64      `json:"version,omitempty"`
	// Source is live, stale, snapshot or env: OFREP has no reason for an
	// answer served while the agent cannot reach etcd.
	Source string `json:"source"`
}

// ofrepError is a failed evaluation (evaluationFailure, flagNotFound, and
// the failures inside a bulk answer).
type ofrepError struct {
	Key     string `json:"key,omitempty"`
	Code    string `json:"errorCode"`
	Details string `json:"errorDetails"`
	status  int
}

// ofrepRequest is the body of both endpoints. Context attributes other
// than targetingKey do not change an answer and are not decoded.
type ofrepRequest struct {
	Context struct {
		TargetingKey string `json:"targetingKey"` // "" or absent: the agent's own decision
	} `json:"context"`
}

// bodies recycles request body buffers.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ofrep serves the OFREP API of an agent.
type ofrep struct {
	a       *Agent
	token   []byte             // required bearer token; nil: none
	limiter *limit.TokenBucket // nil: unlimited
	evals   *prometheus.CounterVec
	mux     *http.ServeMux
}

// newOFREP builds the OFREP API of a; it reads the token file now so a bad
// --ofrep-token-file stops the agent at start.
func newOFREP(a *Agent, clock limit.Clock) (*ofrep, error) {
	o := &ofrep{a: a, mux: http.NewServeMux()}
	if f := a.cfg.OFREPTokenFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", setting("ofrep-token-file"), err)
		}
		if o.token = []byte(strings.TrimSpace(string(b))); len(o.token) == 0 {
			return nil, fmt.Errorf("%s: %s is empty", setting("ofrep-token-file"), f)
		}
	}
	if r := a.cfg.OFREPRate; r > 0 {
		o.limiter = limit.NewTokenBucket(r, int(math.Ceil(r)), clock)
	}
	o.evals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_agent_ofrep_evaluations_total",
		Help: `OFREP evaluations by flag (empty when the flag is not a published switch) and outcome: "true", "false", "fallback", or the failure ("flag_not_found", "parse_error", "invalid_context", "too_large", "rate_limited", "unauthorized", "not_modified" for a bulk 304).`,
	}, []string{"flag", "outcome"})
	a.reg.MustRegister(o.evals)
	o.mux.HandleFunc("POST /ofrep/v1/evaluate/flags/{key}", o.single)
	o.mux.HandleFunc("POST /ofrep/v1/evaluate/flags", o.bulk)
	return o, nil
}

// OFREPHandler returns the OFREP API, nil when the agent serves none.
func (a *Agent) OFREPHandler() http.Handler {
	if a.ofrep == nil {
		return nil
	}
	return a.ofrep
}

// ServeHTTP admits a request (token, limiter) before routing it.
func (o *ofrep) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.token != nil {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case !ok || got == "":
			o.count("", outcomeDenied)
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard-agent"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		case subtle.ConstantTimeCompare([]byte(got), o.token) != 1:
			o.count("", outcomeDenied)
			w.WriteHeader(http.StatusForbidden)
			return
		}
	}
	if o.limiter != nil {
		if d := o.limiter.Allow(); !d.OK {
			o.count("", outcomeLimited)
			secs := max(1, int(math.Ceil(d.RetryAfter.Seconds())))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
	}
	o.mux.ServeHTTP(w, r)
}

func (o *ofrep) count(flag, outcome string) { o.evals.WithLabelValues(flag, outcome).Inc() }

// decode reads the body: empty means an empty context. It returns the
// targeting key ("" when absent) or the failure to answer.
func decode(w http.ResponseWriter, r *http.Request) (string, *ofrepError) {
	buf := bodies.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 { // keep small buffers only
			buf.Reset()
			bodies.Put(buf)
		}
	}()
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxOFREPBody))
	data := buf.Bytes()
	if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
		return "", &ofrepError{Code: codeGeneral, status: http.StatusRequestEntityTooLarge,
			Details: fmt.Sprintf("the request body is larger than %d bytes", MaxOFREPBody)}
	}
	// Any other read error is a broken connection nobody reads the answer of.
	if len(bytes.TrimSpace(data)) == 0 {
		return "", nil
	}
	var req ofrepRequest
	if err := json.Unmarshal(data, &req); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			where := "the body"
			if typ.Field != "" {
				where = typ.Field
			}
			return "", &ofrepError{Code: codeInvalid, status: http.StatusBadRequest,
				Details: fmt.Sprintf(`%s: must be %s, not a JSON %s; send {"context":{"targetingKey":"user-1"}}`, where, want(typ.Field), typ.Value)}
		}
		return "", &ofrepError{Code: codeParse, status: http.StatusBadRequest,
			Details: fmt.Sprintf(`the body is not valid JSON (%v); send {"context":{"targetingKey":"user-1"}}`, err)}
	}
	return req.Context.TargetingKey, nil
}

// want names the JSON type a field of the request must have.
func want(field string) string {
	if field == "context.targetingKey" {
		return "a string"
	}
	return "an object"
}

// writeOFREP writes a JSON answer.
func writeOFREP(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers a failure and counts it. A client's mistake is logged at
// debug level only: it is the client's to fix, not the operator's.
func (o *ofrep) fail(w http.ResponseWriter, r *http.Request, flag string, e *ofrepError) {
	outcome := strings.ToLower(e.Code)
	if e.status == http.StatusRequestEntityTooLarge {
		outcome = outcomeTooLarge
	}
	o.count(flag, outcome)
	o.a.log.Debug("ofrep request refused", "path", r.URL.Path, "code", e.Code, "details", e.Details)
	writeOFREP(w, e.status, e)
}

func (o *ofrep) single(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	tk, bad := decode(w, r)
	if bad != nil {
		bad.Key = key
		o.fail(w, r, o.a.publishedName(key), bad)
		return
	}
	ctx := r.Context()
	if tk != "" {
		ctx = sdk.WithKey(ctx, tk)
	}
	ev, e := o.a.evaluate(ctx, key, true)
	if e != nil {
		o.fail(w, r, o.a.publishedName(key), e)
		return
	}
	o.count(o.a.publishedName(key), outcome(ev))
	writeOFREP(w, http.StatusOK, ev)
}

// outcome is the metric outcome of a successful evaluation.
func outcome(ev ofrepEvaluation) string {
	if b, ok := ev.Value.(bool); ok {
		return strconv.FormatBool(b)
	}
	return "fallback"
}

// bulk answers every published switch and the fallback companion of each
// that has a payload. The ETag is a hash of the answer, so it changes
// exactly when one of this context's answers (or their metadata) changes.
func (o *ofrep) bulk(w http.ResponseWriter, r *http.Request) {
	tk, bad := decode(w, r)
	if bad != nil {
		o.fail(w, r, "", bad) // bulkEvaluationFailure: the same shape without a key
		return
	}
	ctx := r.Context()
	if tk != "" {
		ctx = sdk.WithKey(ctx, tk)
	}
	all := o.a.client.Switches()
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	slices.Sort(names)
	flags := make([]ofrepEvaluation, 0, 2*len(names))
	for _, name := range names {
		ev, e := o.a.evaluate(ctx, name, false)
		if e != nil { // deleted between the listing and now
			continue
		}
		flags = append(flags, ev)
		if sw := all[name]; len(sw.Fallback) > 0 {
			fb := ev
			fb.Key, fb.Value, fb.Reason, fb.Variant = name+FallbackSuffix, sw.Fallback, reasonStatic, "fallback"
			flags = append(flags, fb)
		}
	}
	body, err := json.Marshal(map[string]any{"flags": flags})
	if err != nil {
		writeOFREP(w, http.StatusInternalServerError, map[string]string{"errorDetails": err.Error()})
		return
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if matches(r.Header.Get("If-None-Match"), etag) {
		o.count("", outcomeNotChanged)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	for _, f := range flags {
		o.count(strings.TrimSuffix(f.Key, FallbackSuffix), outcome(f))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}

// matches reports whether an If-None-Match header lists etag (weak
// comparison, as RFC 9110 asks for If-None-Match).
func matches(header, etag string) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// publishedName is the switch name of a flag key when that switch is
// published, else "": the metric's flag label stays bounded by the
// published set whatever clients ask for.
func (a *Agent) publishedName(key string) string {
	name := strings.TrimSuffix(key, FallbackSuffix)
	if a.handle(name, nil) == nil {
		return ""
	}
	return name
}

// evaluate answers one flag for ctx (which carries the targeting key).
// reads says whether to count the answer in the fleet signals as a read
// of the fallback (the single endpoint does; a bulk listing does not,
// since it serves every payload whether used or not).
func (a *Agent) evaluate(ctx context.Context, key string, reads bool) (ofrepEvaluation, *ofrepError) {
	name, companion := strings.CutSuffix(key, FallbackSuffix)
	h := a.handle(name, nil)
	var sw *wire.Switch
	if h != nil {
		sw = h.Value()
	}
	if sw == nil {
		if _, env := os.LookupEnv(sdk.EnvVar(a.cfg.App, name)); env && !companion && wire.ValidName(name) {
			on := a.client.On(ctx, name)
			return ofrepEvaluation{Key: key, Value: on, Reason: reasonStatic, Variant: variant(on),
				Metadata: ofrepMetadata{Source: sdk.SourceEnv.String()}}, nil
		}
		return ofrepEvaluation{}, a.notFound(key, name)
	}
	md := ofrepMetadata{Level: sw.Level, State: sw.State, Version: sw.Version, Source: h.Source().String()}
	if companion {
		if len(sw.Fallback) == 0 {
			return ofrepEvaluation{}, &ofrepError{Key: key, Code: codeFlagNotFound, status: http.StatusNotFound,
				Details: fmt.Sprintf("switch %q (level %s) has no fallback value; only L1 switches carry one — evaluate %q for whether it is on", name, sw.Level, name)}
		}
		var v json.RawMessage
		if reads {
			if err := h.Fallback(&v); err != nil { // counts the fallback served
				v = sw.Fallback
			}
		} else {
			v = sw.Fallback
		}
		return ofrepEvaluation{Key: key, Value: v, Reason: reasonStatic, Variant: "fallback", Metadata: md}, nil
	}
	on := h.On(ctx) // counts the read in the fleet signals, as the SDK's own checks do
	return ofrepEvaluation{Key: key, Value: on, Reason: a.reason(sw), Variant: variant(on), Metadata: md}, nil
}

// reason is the OFREP reason of a published switch's answer.
func (a *Agent) reason(sw *wire.Switch) string {
	switch {
	case sw.State != wire.StateOn:
		return reasonDisabled
	case sw.Rollout.Selector != "" && !a.selected(sw.Rollout.Selector):
		return reasonTargeted // the selector left this agent out
	case sw.Rollout.Basis() < sdk.Buckets:
		return reasonSplit
	case sw.Rollout.Selector != "":
		return reasonTargeted
	default:
		return reasonStatic
	}
}

// selected reports whether a rollout selector matches the agent's labels.
func (a *Agent) selected(selector string) bool {
	sel, err := wire.ParseSelector(selector)
	return err == nil && sel.Matches(a.cfg.Labels)
}

func variant(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// notFound is the FLAG_NOT_FOUND answer for key, saying what to check.
func (a *Agent) notFound(key, name string) *ofrepError {
	details := fmt.Sprintf("no switch %q is published for app %q in namespace %q; create it in the console, or check the flag key and the agent's --app and --namespace",
		name, a.cfg.App, a.cfg.Namespace)
	if !wire.ValidName(name) {
		details = fmt.Sprintf("%q is not a switch name: names are lower-case letters, digits, '.', '_' and '-' (at most 63), optionally followed by %q", key, FallbackSuffix)
	}
	return &ofrepError{Key: key, Code: codeFlagNotFound, Details: details, status: http.StatusNotFound}
}
