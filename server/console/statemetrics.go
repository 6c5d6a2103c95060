package console

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/notify"
)

// stateCollector exports, at scrape time, what the database says an
// on-call engineer must hear about: open findings by kind (a switch on past
// its expiry, a trigger locked by flapping, a failed drill) and webhook
// deliveries that are failing. Every console reports the same figures, so
// alerts take the max over consoles. A query that fails or takes longer
// than the timeout leaves the series out of that scrape.
type stateCollector struct {
	db       *gorm.DB
	channels *notify.Service
	now      func() time.Time
	log      *slog.Logger
	timeout  time.Duration

	findings, retrying, failed *prometheus.Desc
}

func newStateCollector(db *gorm.DB, channels *notify.Service, now func() time.Time, log *slog.Logger) *stateCollector {
	return &stateCollector{
		db: db, channels: channels, now: now, log: log, timeout: 2 * time.Second,
		findings: prometheus.NewDesc("switchyard_findings_open", "Open findings by kind (expired_on, trigger_locked, drill_failed, ...).", []string{"kind"}, nil),
		retrying: prometheus.NewDesc("switchyard_webhook_deliveries_retrying", "Webhook deliveries waiting to retry after a failed attempt.", nil, nil),
		failed:   prometheus.NewDesc("switchyard_webhook_deliveries_failed_last_hour", "Webhook deliveries given up (no 2xx within the retry time) in the last hour.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.findings
	ch <- s.retrying
	ch <- s.failed
}

// Collect implements prometheus.Collector.
func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if counts, err := finding.OpenByKind(s.db.WithContext(ctx)); err != nil {
		s.log.Warn("metrics: open findings not counted", "err", err)
	} else {
		for kind, n := range counts {
			ch <- prometheus.MustNewConstMetric(s.findings, prometheus.GaugeValue, float64(n), string(kind))
		}
	}
	if h, err := s.channels.Health(ctx, s.now()); err != nil {
		s.log.Warn("metrics: webhook deliveries not counted", "err", err)
	} else {
		ch <- prometheus.MustNewConstMetric(s.retrying, prometheus.GaugeValue, float64(h.Retrying))
		ch <- prometheus.MustNewConstMetric(s.failed, prometheus.GaugeValue, float64(h.FailedLastHour))
	}
}
