package agent

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/switchyard-io/switchyard/internal/envconf"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Config is the agent's configuration. Every field has a flag and a
// SWITCHYARD_* environment twin; flags win over the environment.
type Config struct {
	Listen          string            // --listen / SWITCHYARD_LISTEN
	EtcdEndpoints   []string          // --etcd-endpoints / SWITCHYARD_ETCD_ENDPOINTS; empty: offline (snapshot, env)
	Namespace       string            // --namespace / SWITCHYARD_NAMESPACE
	App             string            // --app / SWITCHYARD_APP (required)
	InstanceID      string            // --instance-id / SWITCHYARD_INSTANCE_ID; default <hostname>-<pid>
	Labels          map[string]string // --labels / SWITCHYARD_LABELS, "k=v,k2=v2"
	SnapshotDir     string            // --snapshot-dir / SWITCHYARD_SNAPSHOT_DIR
	ShutdownTimeout time.Duration     // --shutdown-timeout / SWITCHYARD_SHUTDOWN_TIMEOUT
	// Etcd is TLS and etcd credentials: --etcd-ca-file, --etcd-cert-file,
	// --etcd-key-file, --etcd-server-name, --etcd-username,
	// --etcd-password-file and SWITCHYARD_ETCD_PASSWORD (environment only),
	// each with its SWITCHYARD_ETCD_* twin. The SDK role of `console etcd
	// init-auth` is all the agent needs.
	Etcd sdk.EtcdSecurity
}

// DefaultConfig returns the defaults: loopback listener, namespace
// "default", snapshot in ./agent-data.
func DefaultConfig() Config {
	return Config{
		Listen:          "127.0.0.1:8090",
		Namespace:       sdk.DefaultNamespace,
		SnapshotDir:     "./agent-data",
		ShutdownTimeout: 10 * time.Second,
	}
}

// AddFlags registers the configuration's flags on fs, with the current
// values as defaults.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", c.Listen, "HTTP listen address; keep it on loopback, the API has no authentication")
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
	fs.StringVar(&c.Etcd.CAFile, "etcd-ca-file", c.Etcd.CAFile, "PEM file of the CA etcd's certificate is checked against (set: TLS to etcd)")
	fs.StringVar(&c.Etcd.CertFile, "etcd-cert-file", c.Etcd.CertFile, "PEM client certificate file for etcd")
	fs.StringVar(&c.Etcd.KeyFile, "etcd-key-file", c.Etcd.KeyFile, "PEM file of the client certificate's key")
	fs.StringVar(&c.Etcd.ServerName, "etcd-server-name", c.Etcd.ServerName, "name etcd's certificate must carry, when not the endpoint's host")
	fs.StringVar(&c.Etcd.Username, "etcd-username", c.Etcd.Username, "etcd user name (the SDK role of console etcd init-auth)")
	fs.StringVar(&c.Etcd.PasswordFile, "etcd-password-file", c.Etcd.PasswordFile, "file holding the etcd user's password (or SWITCHYARD_ETCD_PASSWORD)")
}

// LoadEnv overrides fields from SWITCHYARD_* environment variables.
func (c *Config) LoadEnv(getenv func(string) string) error {
	e := envconf.New(getenv)
	e.String("SWITCHYARD_LISTEN", &c.Listen)
	e.List("SWITCHYARD_ETCD_ENDPOINTS", &c.EtcdEndpoints)
	e.String("SWITCHYARD_NAMESPACE", &c.Namespace)
	e.String("SWITCHYARD_APP", &c.App)
	e.String("SWITCHYARD_INSTANCE_ID", &c.InstanceID)
	e.String("SWITCHYARD_SNAPSHOT_DIR", &c.SnapshotDir)
	e.Parse("SWITCHYARD_LABELS", func(v string) (err error) {
		c.Labels, err = ParseLabels(v)
		return err
	})
	e.Duration("SWITCHYARD_SHUTDOWN_TIMEOUT", &c.ShutdownTimeout)
	e.String("SWITCHYARD_ETCD_CA_FILE", &c.Etcd.CAFile)
	e.String("SWITCHYARD_ETCD_CERT_FILE", &c.Etcd.CertFile)
	e.String("SWITCHYARD_ETCD_KEY_FILE", &c.Etcd.KeyFile)
	e.String("SWITCHYARD_ETCD_SERVER_NAME", &c.Etcd.ServerName)
	e.String("SWITCHYARD_ETCD_USERNAME", &c.Etcd.Username)
	e.String("SWITCHYARD_ETCD_PASSWORD", &c.Etcd.Password)
	e.String("SWITCHYARD_ETCD_PASSWORD_FILE", &c.Etcd.PasswordFile)
	return e.Err()
}

// Validate reports every invalid field, naming its flag.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen: %w", err))
	}
	if c.App == "" {
		errs = append(errs, errors.New("--app (SWITCHYARD_APP) is required"))
	} else if !wire.ValidName(c.App) {
		errs = append(errs, fmt.Errorf("--app: %q is not a valid app name", c.App))
	}
	if !wire.ValidName(c.Namespace) {
		errs = append(errs, fmt.Errorf("--namespace: %q is not a valid name", c.Namespace))
	}
	if len(c.InstanceID) > 253 {
		errs = append(errs, errors.New("--instance-id: longer than 253 bytes"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout: must be positive"))
	}
	if err := c.Etcd.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--etcd-*: %w", err))
	}
	return errors.Join(errs...)
}

// SDKConfig is the SDK client configuration the agent runs with.
func (c *Config) SDKConfig() sdk.Config {
	return sdk.Config{
		Endpoints:   slices.Clone(c.EtcdEndpoints),
		Namespace:   c.Namespace,
		App:         c.App,
		InstanceID:  c.InstanceID,
		Labels:      c.Labels,
		SnapshotDir: c.SnapshotDir,
		Security:    c.Etcd,
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
