package sdk

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Version is the SDK version reported in the instance registry.
const Version = "0.1.0"

// Config configures a Client. The zero value of every optional field has a
// documented default; App is the only required field.
type Config struct {
	// Endpoints are the etcd client URLs. Empty runs the client offline:
	// it answers from the disk snapshot, the environment and defaults only.
	Endpoints []string
	// Namespace is the deployment environment. Default "default".
	Namespace string
	// App is the service's app name (required, ^[a-z0-9][a-z0-9._-]{0,62}$).
	App string
	// InstanceID identifies this process in the rollout hash and the
	// instance registry. Default "<hostname>-<pid>".
	InstanceID string
	// Labels are this instance's labels, matched by rollout selectors and
	// published in the instance registry. Default none.
	Labels map[string]string
	// SnapshotDir is where the disk snapshot lives, one file per namespace
	// and app (<dir>/<namespace>/<app>.snapshot). Empty: no disk snapshot.
	SnapshotDir string
	// Logger receives the SDK's own logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the SDK metrics, labelled with namespace, app and
	// instance, so several clients may share one registerer as long as their
	// (namespace, app, instance) differ. Default nil: no metrics.
	Registerer prometheus.Registerer
	// DialTimeout bounds connecting and each list or registry call.
	// Default 5s.
	DialTimeout time.Duration
	// TLS is the client TLS configuration for etcd. Default nil: plain
	// text, unless Security names TLS files (then both may not be set).
	TLS *tls.Config
	// Security is TLS from files and etcd's user name and password; with
	// auth on, a user of the role `console etcd init-auth` makes for SDKs
	// (read switches, limits and overrides; write instance keys) is all
	// the SDK needs. Default none.
	Security EtcdSecurity
	// LeaseTTL is the instance registry lease TTL. Default 10s.
	LeaseTTL time.Duration
	// ReportInterval is how often, at most, the instance reports its fleet
	// signals (degraded answers, fallbacks served, last reads, degraded-path
	// latency, limiter decisions, breaker states) on its registry key, and
	// only when they changed; each report comes up to 20 % later, so a fleet
	// spreads its writes and an instance never writes sooner. An applied
	// revision is still acknowledged within about a second, with a report,
	// and a flip's counters follow within 5 s. Default 10s, at least 1s.
	ReportInterval time.Duration
}

// Defaults used for zero-valued Config fields.
const (
	DefaultNamespace   = "default"
	DefaultDialTimeout = 5 * time.Second
	DefaultLeaseTTL    = 10 * time.Second
	// DefaultReportInterval is the default of Config.ReportInterval.
	DefaultReportInterval = 10 * time.Second
)

// withDefaults returns a copy of c with defaults filled in.
func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.InstanceID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "unknown"
		}
		c.InstanceID = host + "-" + strconv.Itoa(os.Getpid())
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.ReportInterval <= 0 {
		c.ReportInterval = DefaultReportInterval
	}
	return c
}

// Validate reports the first invalid field of c (after defaults apply).
func (c Config) Validate() error {
	c = c.withDefaults()
	if !wire.ValidName(c.Namespace) {
		return fmt.Errorf("sdk: config: namespace %q is not a valid name", c.Namespace)
	}
	if c.App == "" {
		return errors.New("sdk: config: app is required")
	}
	if !wire.ValidName(c.App) {
		return fmt.Errorf("sdk: config: app %q is not a valid name", c.App)
	}
	if len(c.InstanceID) > 253 {
		return errors.New("sdk: config: instance_id is longer than 253 bytes")
	}
	for _, ep := range c.Endpoints {
		if ep == "" {
			return errors.New("sdk: config: endpoints: empty endpoint")
		}
	}
	if err := c.Security.Validate(); err != nil {
		return fmt.Errorf("sdk: config: %w", err)
	}
	if c.TLS != nil && c.Security.TLSEnabled() {
		return errors.New("sdk: config: TLS and Security's TLS files: give one")
	}
	if c.LeaseTTL < 2*time.Second {
		return errors.New("sdk: config: lease_ttl must be at least 2s")
	}
	if c.ReportInterval < time.Second {
		return errors.New("sdk: config: report_interval must be at least 1s")
	}
	return nil
}
