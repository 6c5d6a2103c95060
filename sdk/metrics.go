package sdk

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exposes the client's state at scrape time, so the hot path
// never touches a metric. Every series carries the const labels
// namespace, app and instance.
type collector struct {
	c            *Client
	switchState  *prometheus.Desc
	revision     *prometheus.Desc
	snapshotAge  *prometheus.Desc
	connected    *prometheus.Desc
	stale        *prometheus.Desc
	updateErrors *prometheus.Desc
	fallbacks    *prometheus.Desc
}

func newCollector(c *Client) *collector {
	cl := prometheus.Labels{"namespace": c.cfg.Namespace, "app": c.cfg.App, "instance": c.cfg.InstanceID}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("switchyard_sdk_"+name, help, labels, cl)
	}
	return &collector{
		c:            c,
		switchState:  d("switch_on", "1 when the switch is on for this instance (instance stickiness), else 0.", "switch", "level", "source"),
		revision:     d("applied_revision", "etcd revision of the applied switch set."),
		snapshotAge:  d("snapshot_age_seconds", "Seconds since the served data was last confirmed current by etcd (or since the disk snapshot was written)."),
		connected:    d("watch_connected", "1 while the etcd watch runs and etcd answers heartbeats."),
		stale:        d("stale", "1 while answers may be out of date (see Client.Stale)."),
		updateErrors: d("update_errors_total", "Updates that could not be used, by kind: decode (published value), snapshot (disk snapshot read or write), watch (failed list or broken watch).", "kind"),
		fallbacks:    d("fallbacks_served_total", "Answers served from environment, code default or off because no published value existed."),
	}
}

// Describe implements prometheus.Collector.
func (m *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.switchState, m.revision, m.snapshotAge, m.connected, m.stale, m.updateErrors, m.fallbacks} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *collector) Collect(ch chan<- prometheus.Metric) {
	c := m.c
	s := c.state.Load()
	for name, i := range s.index {
		if int(i) >= len(s.entries) || s.entries[i].sw == nil {
			continue
		}
		e := &s.entries[i]
		ch <- prometheus.MustNewConstMetric(m.switchState, prometheus.GaugeValue, b2f(e.on), name, string(e.sw.Level), c.reported(e.source).String())
	}
	ch <- prometheus.MustNewConstMetric(m.revision, prometheus.GaugeValue, float64(s.rev))
	fresh := s.dataAt
	if at := c.freshAt.Load(); at != 0 && s.source == SourceLive {
		fresh = time.Unix(0, at)
	}
	if !fresh.IsZero() {
		ch <- prometheus.MustNewConstMetric(m.snapshotAge, prometheus.GaugeValue, time.Since(fresh).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(m.connected, prometheus.GaugeValue, b2f(c.connected()))
	ch <- prometheus.MustNewConstMetric(m.stale, prometheus.GaugeValue, b2f(c.Stale()))
	ch <- prometheus.MustNewConstMetric(m.updateErrors, prometheus.CounterValue, float64(c.decodeErrors.Load()), "decode")
	ch <- prometheus.MustNewConstMetric(m.updateErrors, prometheus.CounterValue, float64(c.snapErrors.Load()), "snapshot")
	ch <- prometheus.MustNewConstMetric(m.updateErrors, prometheus.CounterValue, float64(c.watchErrors.Load()), "watch")
	ch <- prometheus.MustNewConstMetric(m.fallbacks, prometheus.CounterValue, float64(c.fallbacksServed()))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
