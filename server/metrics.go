package server

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the control plane's background-job metrics.
type Metrics struct {
	PublishLag       prometheus.Histogram
	Published        prometheus.Counter
	PublishErrors    prometheus.Counter
	OutboxDepth      prometheus.Gauge
	ReconcileRepairs *prometheus.CounterVec
	Reconciles       prometheus.Counter
	Leader           prometheus.Gauge
	// JobPanics counts leader-job steps that panicked (and were
	// recovered), by job.
	JobPanics *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		PublishLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchyard_publish_lag_seconds",
			Help:    "Time from the commit of a change to its etcd publication.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30, 120},
		}),
		Published:     prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_published_total", Help: "Entities published to etcd."}),
		PublishErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_publish_errors_total", Help: "Failed publish attempts."}),
		OutboxDepth:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchyard_outbox_depth", Help: "Changes committed but not yet published."}),
		ReconcileRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_reconciler_repairs_total", Help: "Keys the reconciler repaired, by action.",
		}, []string{"action"}),
		Reconciles: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_reconciles_total", Help: "Completed reconciler passes."}),
		Leader:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchyard_leader", Help: "1 while this console holds the scheduler election."}),
		JobPanics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_job_panics_total", Help: "Leader-job steps that panicked and were recovered, by job.",
		}, []string{"job"}),
	}
	for _, action := range []string{"put", "delete"} {
		m.ReconcileRepairs.WithLabelValues(action) // export zeros before the first repair
	}
	if reg != nil {
		reg.MustRegister(m.PublishLag, m.Published, m.PublishErrors, m.OutboxDepth, m.ReconcileRepairs, m.Reconciles, m.Leader, m.JobPanics)
	}
	return m
}
