package agent

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/envconf"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Config is the agent's configuration. Every field has a flag and an
// environment twin (see settings); flags win over the environment.
//
// The agent's own settings are SWITCHYARD_AGENT_*, so that exporting a
// console's SWITCHYARD_LISTEN on the same host does not move the agent.
// Only the namespace and the etcd endpoints are shared with the console and
// the SDK services (SWITCHYARD_NAMESPACE, SWITCHYARD_ETCD_ENDPOINTS): the
// agent must read the same cluster and environment they write and read.
type Config struct {
	Listen          string            // --listen: the JSON API
	OFREPListen     string            // --ofrep-listen: the OFREP API; "off" (or empty) disables it
	OFREPTokenFile  string            // --ofrep-token-file: bearer token required by the OFREP API; empty: none
	OFREPRate       float64           // --ofrep-rate: OFREP evaluations per second before 429; 0: unlimited
	EtcdEndpoints   []string          // --etcd-endpoints; empty: offline (snapshot, env)
	Namespace       string            // --namespace
	App             string            // --app (required)
	InstanceID      string            // --instance-id; default <hostname>-<pid>
	Labels          map[string]string // --labels, "k=v,k2=v2"
	SnapshotDir     string            // --snapshot-dir; empty: no disk snapshot
	ShutdownTimeout time.Duration     // --shutdown-timeout
	ReportInterval  time.Duration     // --report-interval: how often, at most, fleet signals are reported
	// Etcd is TLS to etcd and the agent's etcd user: --etcd-ca-file,
	// --etcd-cert-file, --etcd-key-file, --etcd-server-name,
	// --etcd-username, --etcd-password-file, and the password itself in
	// SWITCHYARD_AGENT_ETCD_PASSWORD (environment only). The agent's own
	// (SWITCHYARD_AGENT_ETCD_*): its credentials are not the console's.
	// The SDK role of `console etcd init-auth` is all it needs.
	Etcd sdk.EtcdSecurity
}

// settings maps each flag to its environment variable.
var settings = []struct{ flag, env string }{
	{"listen", "SWITCHYARD_AGENT_LISTEN"},
	{"ofrep-listen", "SWITCHYARD_AGENT_OFREP_LISTEN"},
	{"ofrep-token-file", "SWITCHYARD_AGENT_OFREP_TOKEN_FILE"},
	{"ofrep-rate", "SWITCHYARD_AGENT_OFREP_RATE"},
	{"etcd-endpoints", "SWITCHYARD_ETCD_ENDPOINTS"},
	{"namespace", "SWITCHYARD_NAMESPACE"},
	{"app", "SWITCHYARD_AGENT_APP"},
	{"instance-id", "SWITCHYARD_AGENT_INSTANCE_ID"},
	{"labels", "SWITCHYARD_AGENT_LABELS"},
	{"snapshot-dir", "SWITCHYARD_AGENT_SNAPSHOT_DIR"},
	{"shutdown-timeout", "SWITCHYARD_AGENT_SHUTDOWN_TIMEOUT"},
	{"report-interval", "SWITCHYARD_AGENT_REPORT_INTERVAL"},
	{"etcd-ca-file", "SWITCHYARD_AGENT_ETCD_CA_FILE"},
	{"etcd-cert-file", "SWITCHYARD_AGENT_ETCD_CERT_FILE"},
	{"etcd-key-file", "SWITCHYARD_AGENT_ETCD_KEY_FILE"},
	{"etcd-server-name", "SWITCHYARD_AGENT_ETCD_SERVER_NAME"},
	{"etcd-username", "SWITCHYARD_AGENT_ETCD_USERNAME"},
	{"etcd-password-file", "SWITCHYARD_AGENT_ETCD_PASSWORD_FILE"},
}

// etcdPasswordEnv holds the agent's etcd password itself (no flag: a
// secret never goes on a command line).
const etcdPasswordEnv = "SWITCHYARD_AGENT_ETCD_PASSWORD"

// setting is how an operator sets flag name: "--listen or SWITCHYARD_AGENT_LISTEN".
func setting(name string) string {
	for _, s := range settings {
		if s.flag == name {
			return "--" + name + " or " + s.env
		}
	}
	return "--" + name
}

// env is the environment variable of flag name.
func env(name string) string {
	for _, s := range settings {
		if s.flag == name {
			return s.env
		}
	}
	panic("agent: no setting " + name)
}

// DefaultConfig returns the defaults: loopback listeners (JSON API on
// 8090, OFREP on 8016, the port OpenFeature's OFREP providers default to),
// namespace "default", snapshot in ./agent-data.
func DefaultConfig() Config {
	return Config{
		Listen:          "127.0.0.1:8090",
		OFREPListen:     "127.0.0.1:8016",
		OFREPRate:       10000,
		Namespace:       sdk.DefaultNamespace,
		SnapshotDir:     "./agent-data",
		ShutdownTimeout: 10 * time.Second,
		ReportInterval:  sdk.DefaultReportInterval,
	}
}

// AddFlags registers the configuration's flags on fs, with the current
// values as defaults.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", c.Listen, "HTTP listen address of the JSON API; keep it on loopback, the API has no authentication")
	fs.StringVar(&c.OFREPListen, "ofrep-listen", c.OFREPListen, "listen address of the OpenFeature Remote Evaluation Protocol (OFREP) API; off turns it off")
	fs.StringVar(&c.OFREPTokenFile, "ofrep-token-file", c.OFREPTokenFile, "file holding the bearer token the OFREP API requires; without it the OFREP API has no authentication")
	fs.Float64Var(&c.OFREPRate, "ofrep-rate", c.OFREPRate, "OFREP evaluations per second (a second's worth may come at once) before answering 429; 0 is unlimited")
	envconf.ListVar(fs, &c.EtcdEndpoints, "etcd-endpoints", "comma-separated etcd endpoints; without any the agent runs offline on the snapshot and the environment")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "namespace: the deployment environment")
	fs.StringVar(&c.App, "app", c.App, "app whose switches and limit rules are served (required)")
	fs.StringVar(&c.InstanceID, "instance-id", c.InstanceID, "instance id for the rollout hash and the instance registry (default <hostname>-<pid>)")
	fs.Func("labels", "instance labels matched by rollout selectors, k=v,k2=v2", func(s string) error {
		l, err := ParseLabels(s)
		if err != nil {
			return err
		}
		c.Labels = l
		return nil
	})
	fs.StringVar(&c.SnapshotDir, "snapshot-dir", c.SnapshotDir, `directory of the disk snapshot; --snapshot-dir="" keeps none`)
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "time allowed for in-flight requests at shutdown")
	fs.DurationVar(&c.ReportInterval, "report-interval", c.ReportInterval, "how often, at most, the agent reports its fleet signals (the reads it served) to the console; at least 1s")
	fs.StringVar(&c.Etcd.CAFile, "etcd-ca-file", c.Etcd.CAFile, "PEM file of the CA etcd's certificate is checked against (set: TLS to etcd)")
	fs.StringVar(&c.Etcd.CertFile, "etcd-cert-file", c.Etcd.CertFile, "PEM client certificate file for etcd")
	fs.StringVar(&c.Etcd.KeyFile, "etcd-key-file", c.Etcd.KeyFile, "PEM file of the client certificate's key")
	fs.StringVar(&c.Etcd.ServerName, "etcd-server-name", c.Etcd.ServerName, "name etcd's certificate must carry, when not the endpoint's host")
	fs.StringVar(&c.Etcd.Username, "etcd-username", c.Etcd.Username, "etcd user name (the SDK role of console etcd init-auth)")
	fs.StringVar(&c.Etcd.PasswordFile, "etcd-password-file", c.Etcd.PasswordFile, "file holding the etcd user's password (or the password itself in "+etcdPasswordEnv+")")
}

// LoadEnv overrides fields from the environment (see settings).
func (c *Config) LoadEnv(getenv func(string) string) error {
	e := envconf.New(getenv)
	e.String(env("listen"), &c.Listen)
	e.String(env("ofrep-listen"), &c.OFREPListen)
	e.String(env("ofrep-token-file"), &c.OFREPTokenFile)
	e.Parse(env("ofrep-rate"), func(v string) (err error) {
		c.OFREPRate, err = strconv.ParseFloat(v, 64)
		return err
	})
	e.List(env("etcd-endpoints"), &c.EtcdEndpoints)
	e.String(env("namespace"), &c.Namespace)
	e.String(env("app"), &c.App)
	e.String(env("instance-id"), &c.InstanceID)
	e.String(env("snapshot-dir"), &c.SnapshotDir)
	e.Parse(env("labels"), func(v string) (err error) {
		c.Labels, err = ParseLabels(v)
		return err
	})
	e.Duration(env("shutdown-timeout"), &c.ShutdownTimeout)
	e.Duration(env("report-interval"), &c.ReportInterval)
	e.String(env("etcd-ca-file"), &c.Etcd.CAFile)
	e.String(env("etcd-cert-file"), &c.Etcd.CertFile)
	e.String(env("etcd-key-file"), &c.Etcd.KeyFile)
	e.String(env("etcd-server-name"), &c.Etcd.ServerName)
	e.String(env("etcd-username"), &c.Etcd.Username)
	e.String(env("etcd-password-file"), &c.Etcd.PasswordFile)
	e.String(etcdPasswordEnv, &c.Etcd.Password)
	return e.Err()
}

// Validate reports every invalid field, naming its flag and variable.
func (c *Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", setting(name), fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port", c.Listen)
	}
	if c.OFREPOn() {
		if _, _, err := net.SplitHostPort(c.OFREPListen); err != nil {
			bad("ofrep-listen", "%q is not host:port", c.OFREPListen)
		}
	}
	if !(c.OFREPRate >= 0) { // also refuses NaN
		bad("ofrep-rate", "must be 0 (unlimited) or positive")
	}
	if c.App == "" {
		bad("app", "required")
	} else if !wire.ValidName(c.App) {
		bad("app", "%q is not a valid app name", c.App)
	}
	if !wire.ValidName(c.Namespace) {
		bad("namespace", "%q is not a valid name", c.Namespace)
	}
	if len(c.InstanceID) > 253 {
		bad("instance-id", "longer than 253 bytes")
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown-timeout", "must be positive")
	}
	if c.ReportInterval < time.Second {
		bad("report-interval", "must be at least 1s")
	}
	if err := c.Etcd.Validate(); err != nil {
		bad("etcd-username", "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if err := errors.Join(errs...); err != nil {
		return errors.New(strings.ReplaceAll(err.Error(), "\n", "; ")) // one line
	}
	return nil
}

// OFREPOn reports whether the OFREP API is served.
func (c *Config) OFREPOn() bool { return c.OFREPListen != "" && c.OFREPListen != "off" }

// SDKConfig is the SDK client configuration the agent runs with.
func (c *Config) SDKConfig() sdk.Config {
	return sdk.Config{
		Endpoints:      slices.Clone(c.EtcdEndpoints),
		Namespace:      c.Namespace,
		App:            c.App,
		InstanceID:     c.InstanceID,
		Labels:         c.Labels,
		SnapshotDir:    c.SnapshotDir,
		ReportInterval: c.ReportInterval,
		Security:       c.Etcd,
	}
}

// ParseLabels parses "k=v,k2=v2" with the rollout selector's syntax.
func ParseLabels(s string) (map[string]string, error) {
	sel, err := wire.ParseSelector(s)
	if err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	m := make(map[string]string, len(sel))
	for _, p := range sel {
		if _, dup := m[p.Key]; dup {
			return nil, fmt.Errorf("labels: %q given twice", p.Key)
		}
		m[p.Key] = p.Value
	}
	return m, nil
}
