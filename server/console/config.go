// Package console assembles the console: it opens the database, connects to
// (or embeds) etcd, ensures the bootstrap token, starts the scheduler and
// serves the HTTP API. cmd/console only parses flags and calls Start.
package console

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/envconf"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Config is the console's configuration. Every field has a flag and a
// SWITCHYARD_* environment twin; flags win over the environment.
type Config struct {
	Listen            string        // --listen / SWITCHYARD_LISTEN
	DataDir           string        // --data-dir / SWITCHYARD_DATA_DIR
	EtcdEndpoints     []string      // --etcd-endpoints / SWITCHYARD_ETCD_ENDPOINTS; empty: embedded etcd
	DatabaseURL       string        // --database-url / SWITCHYARD_DATABASE_URL; empty: embedded SQLite
	Namespace         string        // --namespace / SWITCHYARD_NAMESPACE
	BootstrapToken    string        // SWITCHYARD_BOOTSTRAP_TOKEN only (a secret never goes on a command line)
	EmbeddedEtcdURL   string        // --embedded-etcd-client-url / SWITCHYARD_EMBEDDED_ETCD_CLIENT_URL
	EmbeddedEtcdPeer  string        // --embedded-etcd-peer-url / SWITCHYARD_EMBEDDED_ETCD_PEER_URL
	ReconcileInterval time.Duration // --reconcile-interval / SWITCHYARD_RECONCILE_INTERVAL
	PublishWait       time.Duration // --publish-wait / SWITCHYARD_PUBLISH_WAIT
	RequestTimeout    time.Duration // --request-timeout / SWITCHYARD_REQUEST_TIMEOUT
	ShutdownTimeout   time.Duration // --shutdown-timeout / SWITCHYARD_SHUTDOWN_TIMEOUT
	ConsoleID         string        // --id / SWITCHYARD_CONSOLE_ID; default hostname/listen-address
	// TrustedProxies are the addresses (IPs or CIDRs) whose X-Forwarded-For
	// is believed for the client address in audit events and throttles;
	// --trusted-proxies / SWITCHYARD_TRUSTED_PROXIES, default none.
	TrustedProxies []string
}

// DefaultConfig returns the defaults of DESIGN §5.
func DefaultConfig() Config {
	return Config{
		Listen:            "127.0.0.1:8080",
		DataDir:           "./data",
		Namespace:         "default",
		EmbeddedEtcdURL:   "http://127.0.0.1:2379",
		EmbeddedEtcdPeer:  "http://127.0.0.1:2380",
		ReconcileInterval: 30 * time.Second,
		PublishWait:       time.Second,
		RequestTimeout:    15 * time.Second,
		ShutdownTimeout:   10 * time.Second,
	}
}

// AddFlags registers the flags on fs, with defaults taken from c (so call it
// after LoadEnv to let the environment set the defaults).
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", c.Listen, "HTTP listen address")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the embedded etcd and SQLite data")
	envconf.ListVar(fs, &c.EtcdEndpoints, "etcd-endpoints", "comma-separated etcd endpoints (empty: start an embedded etcd)")
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "postgres:// URL (empty: embedded SQLite in the data dir)")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "namespace (deployment environment)")
	fs.StringVar(&c.EmbeddedEtcdURL, "embedded-etcd-client-url", c.EmbeddedEtcdURL, "client URL of the embedded etcd")
	fs.StringVar(&c.EmbeddedEtcdPeer, "embedded-etcd-peer-url", c.EmbeddedEtcdPeer, "peer URL of the embedded etcd")
	fs.DurationVar(&c.ReconcileInterval, "reconcile-interval", c.ReconcileInterval, "period of the database/etcd reconciliation")
	fs.DurationVar(&c.PublishWait, "publish-wait", c.PublishWait, "how long a change waits for its etcd publication before answering")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", c.RequestTimeout, "how long a request (API or web page) may wait for the database before it answers 503 (event streams are exempt)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "time allowed for in-flight requests at shutdown")
	fs.StringVar(&c.ConsoleID, "id", c.ConsoleID, "this console's name in the leader election")
	envconf.ListVar(fs, &c.TrustedProxies, "trusted-proxies", "comma-separated proxy IPs/CIDRs whose X-Forwarded-For is trusted (default none)")
}

// LoadEnv overrides fields from SWITCHYARD_* environment variables.
func (c *Config) LoadEnv(getenv func(string) string) error {
	e := envconf.New(getenv)
	e.String("SWITCHYARD_LISTEN", &c.Listen)
	e.String("SWITCHYARD_DATA_DIR", &c.DataDir)
	e.List("SWITCHYARD_ETCD_ENDPOINTS", &c.EtcdEndpoints)
	e.String("SWITCHYARD_DATABASE_URL", &c.DatabaseURL)
	e.String("SWITCHYARD_NAMESPACE", &c.Namespace)
	e.String("SWITCHYARD_BOOTSTRAP_TOKEN", &c.BootstrapToken)
	e.String("SWITCHYARD_EMBEDDED_ETCD_CLIENT_URL", &c.EmbeddedEtcdURL)
	e.String("SWITCHYARD_EMBEDDED_ETCD_PEER_URL", &c.EmbeddedEtcdPeer)
	e.String("SWITCHYARD_CONSOLE_ID", &c.ConsoleID)
	e.List("SWITCHYARD_TRUSTED_PROXIES", &c.TrustedProxies)
	e.Duration("SWITCHYARD_RECONCILE_INTERVAL", &c.ReconcileInterval)
	e.Duration("SWITCHYARD_PUBLISH_WAIT", &c.PublishWait)
	e.Duration("SWITCHYARD_REQUEST_TIMEOUT", &c.RequestTimeout)
	e.Duration("SWITCHYARD_SHUTDOWN_TIMEOUT", &c.ShutdownTimeout)
	return e.Err()
}

// FromEnv is LoadEnv on the process environment.
func (c *Config) FromEnv() error { return c.LoadEnv(os.Getenv) }

// Validate checks the configuration before anything starts.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen: %q is not host:port", c.Listen))
	}
	if !wire.ValidName(c.Namespace) {
		errs = append(errs, fmt.Errorf("namespace: %q must match %s", c.Namespace, wire.NamePattern))
	}
	if len(c.EtcdEndpoints) == 0 && c.DataDir == "" {
		errs = append(errs, errors.New("data-dir: required for the embedded etcd"))
	}
	if c.DatabaseURL == "" && c.DataDir == "" {
		errs = append(errs, errors.New("data-dir: required for the embedded SQLite database"))
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		errs = append(errs, errors.New("database-url: must be a postgres:// URL or empty"))
	}
	if c.ReconcileInterval < 100*time.Millisecond {
		errs = append(errs, errors.New("reconcile-interval: must be at least 100ms"))
	}
	if c.PublishWait <= 0 || c.PublishWait > 30*time.Second {
		errs = append(errs, errors.New("publish-wait: must be between 1ns and 30s"))
	}
	if c.RequestTimeout <= c.PublishWait || c.RequestTimeout > 5*time.Minute {
		errs = append(errs, errors.New("request-timeout: must be longer than publish-wait and at most 5m"))
	}
	if c.BootstrapToken != "" && len(c.BootstrapToken) < 16 {
		errs = append(errs, errors.New("SWITCHYARD_BOOTSTRAP_TOKEN: must be at least 16 characters"))
	}
	return errors.Join(errs...)
}
