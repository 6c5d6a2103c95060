package signal

import "fmt"

// Source names, as rules and gates write them.
const (
	SourceFleet      = "fleet"
	SourcePrometheus = "prometheus"
)

// Sources are the metric sources a console offers its jobs: the fleet
// model, per app, and Prometheus when one is configured.
type Sources struct {
	// Fleet returns the fleet source whose queries are about app.
	Fleet func(app string) Source
	// Prometheus is nil when no Prometheus is configured.
	Prometheus Source
}

// For returns the source named name for app's queries; the error says
// what is wrong with the name (unknown, or Prometheus not configured).
func (s Sources) For(name, app string) (Source, error) {
	switch name {
	case SourceFleet:
		if s.Fleet != nil {
			return s.Fleet(app), nil
		}
	case SourcePrometheus:
		if s.Prometheus != nil {
			return s.Prometheus, nil
		}
		return nil, fmt.Errorf("no Prometheus is configured (set --prometheus-url or SWITCHYARD_PROMETHEUS_URL)")
	default:
		return nil, fmt.Errorf("must be %q or %q", SourceFleet, SourcePrometheus)
	}
	return nil, fmt.Errorf("source %q is not available", name)
}
