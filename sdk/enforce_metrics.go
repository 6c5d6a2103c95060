package sdk

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Decision label values of switchyard_sdk_limit_decisions_total.
const (
	DecisionAllowed     = "allowed"
	DecisionRejected    = "rejected"
	DecisionWouldReject = "would_reject"
)

// Path label values of switchyard_sdk_request_duration_seconds.
const (
	PathNormal   = "normal"
	PathDegraded = "degraded"
)

// enforceMetrics exposes the enforcement state of one client. Decision
// counters live on the Limiter handles as atomics and are read at scrape
// time; the request-latency histogram and degraded-request counter are
// ordinary Prometheus vectors fed by the middleware. Every series carries
// the const labels namespace, app and instance, like the core metrics.
type enforceMetrics struct {
	e           *enforcement
	decisions   *prometheus.Desc
	inflight    *prometheus.Desc
	breaker     *prometheus.Desc
	transitions *prometheus.Desc
	adaptive    *prometheus.Desc
	instances   *prometheus.Desc

	duration *prometheus.HistogramVec
	normal   prometheus.Observer
	degraded prometheus.Observer
	served   *prometheus.CounterVec
}

func newEnforceMetrics(e *enforcement) *enforceMetrics {
	c := e.c
	cl := prometheus.Labels{"namespace": c.cfg.Namespace, "app": c.cfg.App, "instance": c.cfg.InstanceID}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("switchyard_sdk_"+name, help, labels, cl)
	}
	m := &enforceMetrics{
		e:           e,
		decisions:   d("limit_decisions_total", "Limiter decisions by resource, decision (allowed, rejected, would_reject) and reason (none, rate_limited, concurrency_limited, breaker_open, throttled, overloaded, queue_timeout).", "resource", "decision", "reason"),
		inflight:    d("limit_in_flight", "Requests holding a slot of a concurrency or adaptive rule.", "resource"),
		breaker:     d("breaker_state", "1 for the current state (closed, open, half_open) of a resource's circuit breaker, 0 for the others.", "resource", "state"),
		transitions: d("breaker_transitions_total", "Circuit breaker state transitions.", "resource", "from", "to"),
		adaptive:    d("adaptive_limit", "Current concurrency limit of an adaptive rule.", "resource"),
		instances:   d("cluster_instances", "Live instances of the app that cluster-scope rules divide their quota by."),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "switchyard_sdk_request_duration_seconds",
			Help:        "Latency of requests through the SDK middleware, by path: degraded (a switch was on for the request) or normal.",
			Buckets:     []float64{.0005, .001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5},
			ConstLabels: cl,
		}, []string{"path"}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "switchyard_sdk_degraded_requests_total",
			Help:        "Requests served degraded by the SDK middleware, by level and action: served (passed on with the level in the context, L1-L3 and reads under L4/L5), rejected (L4 writes) or queued (L5 writes).",
			ConstLabels: cl,
		}, []string{"level", "action"}),
	}
	m.normal = m.duration.WithLabelValues(PathNormal)
	m.degraded = m.duration.WithLabelValues(PathDegraded)
	return m
}

// Describe implements prometheus.Collector.
func (m *enforceMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.decisions, m.inflight, m.breaker, m.transitions, m.adaptive, m.instances} {
		ch <- d
	}
	m.duration.Describe(ch)
	m.served.Describe(ch)
}

// reasonLabels are the reason label values by limit.Reason ("none" for
// admitted).
var reasonLabels = func() (l [limit.NumReasons]string) {
	for i := range l {
		l[i] = limit.Reason(i).String()
	}
	l[0] = "none"
	return l
}()

var stateLabels = [3]string{"closed", "open", "half_open"}

// Collect implements prometheus.Collector.
func (m *enforceMetrics) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	m.e.limiters.Range(func(_, v any) bool {
		l := v.(*Limiter)
		r := l.resource
		counter(m.decisions, l.allowed.Load(), r, DecisionAllowed, reasonLabels[0])
		for i := 1; i < len(reasonLabels); i++ {
			// The reasons of the overload levers appear once they occur,
			// so every resource does not carry six idle series.
			rej, would := l.rejected[i].Load(), l.wouldReject[i].Load()
			if i <= int(limit.ReasonBreakerOpen) || rej > 0 {
				counter(m.decisions, rej, r, DecisionRejected, reasonLabels[i])
			}
			if i <= int(limit.ReasonBreakerOpen) || would > 0 {
				counter(m.decisions, would, r, DecisionWouldReject, reasonLabels[i])
			}
		}
		for from := range l.transitions {
			for to := range l.transitions[from] {
				if n := l.transitions[from][to].Load(); n > 0 {
					counter(m.transitions, n, r, stateLabels[from], stateLabels[to])
				}
			}
		}
		e := l.cur.Load()
		if e == nil {
			return true
		}
		if e.slots {
			gauge(m.inflight, float64(l.inflight.Load()), r)
		}
		switch x := e.lim.(type) {
		case *limit.Breaker:
			st := x.State()
			for i, name := range stateLabels {
				gauge(m.breaker, b2f(int(st) == i), r, name)
			}
		case *limit.Adaptive:
			gauge(m.adaptive, float64(x.Limit()), r)
		}
		return true
	})
	gauge(m.instances, float64(m.e.peers.Load()))
	m.duration.Collect(ch)
	m.served.Collect(ch)
}

// observe records one middleware request.
func (m *enforceMetrics) observe(level wire.Level, seconds float64) {
	if level != "" {
		m.degraded.Observe(seconds)
	} else {
		m.normal.Observe(seconds)
	}
}
