// Package console assembles the console: it opens the database, connects to
// (or embeds) etcd, ensures the bootstrap token, starts the scheduler and
// serves the HTTP API. cmd/console only parses flags and calls Start.
package console

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/envconf"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server/egress"
	"github.com/switchyard-io/switchyard/server/retention"
	"github.com/switchyard-io/switchyard/server/signal"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// Config is the console's configuration. Every field has a flag and a
// SWITCHYARD_* environment twin; flags win over the environment. A secret
// (the database URL, the bootstrap token, the Prometheus token, the etcd
// password, the OIDC client secret) is also read from a file:
// SWITCHYARD_<NAME>_FILE or --<name>-file, as the Postgres image does.
type Config struct {
	Listen            string        // --listen / SWITCHYARD_LISTEN
	DataDir           string        // --data-dir / SWITCHYARD_DATA_DIR
	EtcdEndpoints     []string      // --etcd-endpoints / SWITCHYARD_ETCD_ENDPOINTS; empty: embedded etcd
	DatabaseURL       string        // --database-url[-file] / SWITCHYARD_DATABASE_URL[_FILE]; empty: embedded SQLite
	Namespace         string        // --namespace / SWITCHYARD_NAMESPACE
	BootstrapToken    string        // SWITCHYARD_BOOTSTRAP_TOKEN[_FILE], --bootstrap-token-file (the token itself never goes on a command line)
	EmbeddedEtcdURL   string        // --embedded-etcd-client-url / SWITCHYARD_EMBEDDED_ETCD_CLIENT_URL
	EmbeddedEtcdPeer  string        // --embedded-etcd-peer-url / SWITCHYARD_EMBEDDED_ETCD_PEER_URL
	ReconcileInterval time.Duration // --reconcile-interval / SWITCHYARD_RECONCILE_INTERVAL
	PublishWait       time.Duration // --publish-wait / SWITCHYARD_PUBLISH_WAIT
	RequestTimeout    time.Duration // --request-timeout / SWITCHYARD_REQUEST_TIMEOUT
	ShutdownTimeout   time.Duration // --shutdown-timeout / SWITCHYARD_SHUTDOWN_TIMEOUT
	ConsoleID         string        // --id / SWITCHYARD_CONSOLE_ID; default hostname/listen-address
	// ElectionTTL is the leader election session's TTL (whole seconds): a
	// leader that dies without resigning is replaced after about this long;
	// --election-ttl / SWITCHYARD_ELECTION_TTL, default 1s.
	ElectionTTL time.Duration
	// TrustedProxies are the addresses (IPs or CIDRs) whose X-Forwarded-For
	// is believed for the client address in audit events and throttles;
	// --trusted-proxies / SWITCHYARD_TRUSTED_PROXIES, default none.
	TrustedProxies []string
	// Prometheus is the metric source leader jobs (triggers, rollout gates,
	// drill aborts) may query besides the fleet: --prometheus-url,
	// --prometheus-timeout / SWITCHYARD_PROMETHEUS_URL, _TIMEOUT, and the
	// bearer token SWITCHYARD_PROMETHEUS_TOKEN[_FILE] or
	// --prometheus-token-file. An empty URL: none.
	PrometheusURL     string
	PrometheusTimeout time.Duration
	PrometheusToken   string
	// Expiry: how often the expiry and findings jobs look (--expiry-interval),
	// how long before its expiry a switch is reminded of
	// (--expiry-remind-before; at most half its max_on; 0: no reminders),
	// and how long an expired switch of policy remind may stay unconfirmed
	// before the escalation (--expiry-escalate-after; 0: none), each with
	// its SWITCHYARD_EXPIRY_* twin.
	ExpiryInterval      time.Duration
	ExpiryRemindBefore  time.Duration
	ExpiryEscalateAfter time.Duration
	// NotifyTimeout bounds one webhook delivery (--notify-timeout /
	// SWITCHYARD_NOTIFY_TIMEOUT): a receiver that never answers holds one
	// of the delivery job's slots this long.
	NotifyTimeout time.Duration
	// TriggerInterval is how often the leader evaluates every auto-trigger
	// rule; --trigger-interval / SWITCHYARD_TRIGGER_INTERVAL, default 5s.
	TriggerInterval time.Duration
	// AuditKeyFile is the audit checkpoint signing key, a file outside the
	// database and etcd (--audit-key-file / SWITCHYARD_AUDIT_KEY_FILE;
	// default <data-dir>/audit-signing.key, generated on the embedded
	// defaults when missing). CheckpointEvents and CheckpointInterval: the
	// leader signs a checkpoint once the log grew by that many events, or
	// grew at all and that long passed (--checkpoint-events,
	// --checkpoint-interval and their SWITCHYARD_* twins).
	AuditKeyFile       string
	CheckpointEvents   int64
	CheckpointInterval time.Duration
	// Retention is how long finished drill runs, resolved findings, ended
	// rollout plans, trigger evaluations and finished deliveries are kept
	// before the leader prunes them; --retention / SWITCHYARD_RETENTION,
	// default 90 days (2160h).
	Retention time.Duration
	// FleetHistoryStep and FleetHistory are how often the fleet model
	// samples the history of each switch and limit rule (sparklines,
	// fleet-source previews) and how much of it is kept, in memory and, by
	// the leader, in the database. No flags: zero takes the fleet model's
	// defaults (30s, 6h); tests shorten them.
	FleetHistoryStep, FleetHistory time.Duration
	// Etcd is how the console's etcd client checks etcd and proves who it
	// is: --etcd-ca-file, --etcd-cert-file, --etcd-key-file,
	// --etcd-server-name, --etcd-username, each with its SWITCHYARD_ETCD_*
	// twin, and the password: SWITCHYARD_ETCD_PASSWORD[_FILE] or
	// --etcd-password-file, read into Password at start.
	Etcd sdk.EtcdSecurity
	// SecretKeyFile holds the keys that seal channel secrets and probe
	// header values at rest (see server/seal); --secret-key-file /
	// SWITCHYARD_SECRET_KEY_FILE. Empty: on the embedded defaults a key
	// file is generated into the data dir; otherwise secrets are not
	// sealed, and the console says so at start.
	SecretKeyFile string
	// TLSCert and TLSKey make the console serve HTTPS (PEM files, reloaded
	// when they change): --tls-cert, --tls-key / SWITCHYARD_TLS_CERT,
	// SWITCHYARD_TLS_KEY. Sign-in cookies are then Secure and answers carry
	// HSTS. Behind a TLS-terminating proxy leave them empty and list the
	// proxy in TrustedProxies.
	TLSCert, TLSKey string
	// EgressAllow names what drill probes and webhook deliveries may reach
	// although the egress guard refuses it (loopback, private, link-local,
	// metadata, the console's own endpoints): CIDRs or host:port;
	// --egress-allow / SWITCHYARD_EGRESS_ALLOW, default none.
	EgressAllow []string
	// OIDC is single sign-on for the web console, and LocalSignIn says
	// who may still sign in with a password while it is on (sso.go,
	// docs/sso.md).
	OIDC        OIDCConfig
	LocalSignIn string
	// SelfApproval lets the author of a change request approve it (off:
	// another person must); RequestTTL is how long a request may wait
	// before it expires. --allow-self-approval, --request-ttl and their
	// SWITCHYARD_* twins.
	SelfApproval bool
	RequestTTL   time.Duration
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
		ElectionTTL:       time.Second,
		PrometheusTimeout: signal.DefaultPrometheusTimeout,

		ExpiryInterval:      10 * time.Second,
		ExpiryRemindBefore:  24 * time.Hour,
		ExpiryEscalateAfter: 4 * time.Hour,
		NotifyTimeout:       5 * time.Second,
		TriggerInterval:     trigger.DefaultInterval,
		CheckpointEvents:    100,
		CheckpointInterval:  10 * time.Minute,
		Retention:           retention.DefaultAge,
		OIDC:                OIDCConfig{GroupsClaim: "groups", Name: "SSO"},
		LocalSignIn:         "all",
		RequestTTL:          time.Hour,
	}
}

// setting binds one Config field to its flag and its SWITCHYARD_*
// environment twin; flag is "" for a variable that has none. Flags,
// environment, -h and the hints of start-up errors all come from this one
// table. A secretValue marks a secret.
type setting struct {
	flag, env, usage string
	value            flag.Value
}

// secretValue is the value of a secret setting: besides $ENV it is read
// from the file $ENV_FILE or --flag-file names (see envconf.Secret). The
// value itself has no flag (it would show in ps) unless valueFlag: a
// database URL need not carry a password. -h never shows it.
type secretValue struct {
	flag.Value
	valueFlag bool
}

func (secretValue) String() string { return "" }

// secret returns s's value if s is a secret.
func (s setting) secret() (secretValue, bool) {
	v, ok := s.value.(secretValue)
	return v, ok
}

func (c *Config) settings() []setting {
	return []setting{
		{"listen", "SWITCHYARD_LISTEN", "HTTP listen address, `host:port`", (*stringValue)(&c.Listen)},
		{"data-dir", "SWITCHYARD_DATA_DIR", "`directory` for the embedded etcd and SQLite data", (*stringValue)(&c.DataDir)},
		{"etcd-endpoints", "SWITCHYARD_ETCD_ENDPOINTS", "comma-separated etcd endpoint `URLs` (empty: start an embedded etcd)", (*listValue)(&c.EtcdEndpoints)},
		{"database-url", "SWITCHYARD_DATABASE_URL", "postgres:// `URL` of the database (empty: embedded SQLite in the data dir)", secretValue{(*stringValue)(&c.DatabaseURL), true}},
		{"namespace", "SWITCHYARD_NAMESPACE", "`namespace` (deployment environment)", (*stringValue)(&c.Namespace)},
		{"bootstrap-token", "SWITCHYARD_BOOTSTRAP_TOKEN", "admin token created on the first start, at least 16 characters (unset: one is generated and printed once)", secretValue{(*stringValue)(&c.BootstrapToken), false}},
		{"embedded-etcd-client-url", "SWITCHYARD_EMBEDDED_ETCD_CLIENT_URL", "client `URL` of the embedded etcd", (*stringValue)(&c.EmbeddedEtcdURL)},
		{"embedded-etcd-peer-url", "SWITCHYARD_EMBEDDED_ETCD_PEER_URL", "peer `URL` of the embedded etcd", (*stringValue)(&c.EmbeddedEtcdPeer)},
		{"reconcile-interval", "SWITCHYARD_RECONCILE_INTERVAL", "period of the database/etcd reconciliation (a `duration`)", (*durationValue)(&c.ReconcileInterval)},
		{"publish-wait", "SWITCHYARD_PUBLISH_WAIT", "how long a change waits for its etcd publication before answering (a `duration`)", (*durationValue)(&c.PublishWait)},
		{"request-timeout", "SWITCHYARD_REQUEST_TIMEOUT", "how long a request (API or web page) may wait for the database before it answers 503; event streams are exempt (a `duration`)", (*durationValue)(&c.RequestTimeout)},
		{"shutdown-timeout", "SWITCHYARD_SHUTDOWN_TIMEOUT", "time allowed for in-flight requests at shutdown (a `duration`)", (*durationValue)(&c.ShutdownTimeout)},
		{"election-ttl", "SWITCHYARD_ELECTION_TTL", "TTL of the leader election session, whole seconds: a leader that dies without resigning is replaced after about this long (a `duration`)", (*durationValue)(&c.ElectionTTL)},
		{"id", "SWITCHYARD_CONSOLE_ID", "this console's `name` in the leader election (default hostname/listen-address)", (*stringValue)(&c.ConsoleID)},
		{"trusted-proxies", "SWITCHYARD_TRUSTED_PROXIES", "comma-separated proxy `addresses` (IPs or CIDRs) whose X-Forwarded-For is trusted (default none)", (*listValue)(&c.TrustedProxies)},
		{"prometheus-url", "SWITCHYARD_PROMETHEUS_URL", "base `URL` of a Prometheus that triggers, rollout gates and drills may query (empty: the fleet is the only metric source)", (*stringValue)(&c.PrometheusURL)},
		{"prometheus-timeout", "SWITCHYARD_PROMETHEUS_TIMEOUT", "how long one Prometheus query may take (a `duration`)", (*durationValue)(&c.PrometheusTimeout)},
		{"prometheus-token", "SWITCHYARD_PROMETHEUS_TOKEN", "bearer token sent to Prometheus (unset: none)", secretValue{(*stringValue)(&c.PrometheusToken), false}},
		{"expiry-interval", "SWITCHYARD_EXPIRY_INTERVAL", "how often the expiry and findings jobs look at the switches (a `duration`)", (*durationValue)(&c.ExpiryInterval)},
		{"expiry-remind-before", "SWITCHYARD_EXPIRY_REMIND_BEFORE", "remind of a switch this long before its expiry, at most half its max_on (a `duration`; 0: no reminders)", (*durationValue)(&c.ExpiryRemindBefore)},
		{"expiry-escalate-after", "SWITCHYARD_EXPIRY_ESCALATE_AFTER", "escalate a switch left on this long past its expiry unconfirmed (policy remind; a `duration`; 0: never)", (*durationValue)(&c.ExpiryEscalateAfter)},
		{"notify-timeout", "SWITCHYARD_NOTIFY_TIMEOUT", "how long one webhook delivery may take before it is retried later (a `duration`)", (*durationValue)(&c.NotifyTimeout)},
		{"trigger-interval", "SWITCHYARD_TRIGGER_INTERVAL", "how often the leader evaluates every auto-trigger rule (a `duration`)", (*durationValue)(&c.TriggerInterval)},
		{"audit-key-file", "SWITCHYARD_AUDIT_KEY_FILE", "`file` holding the audit checkpoint signing key (default <data-dir>/audit-signing.key, generated on the embedded defaults)", (*stringValue)(&c.AuditKeyFile)},
		{"checkpoint-events", "SWITCHYARD_CHECKPOINT_EVENTS", "sign an audit checkpoint once the log grew by this many `events`", (*int64Value)(&c.CheckpointEvents)},
		{"checkpoint-interval", "SWITCHYARD_CHECKPOINT_INTERVAL", "sign an audit checkpoint once this long passed and the log grew (a `duration`)", (*durationValue)(&c.CheckpointInterval)},
		{"retention", "SWITCHYARD_RETENTION", "how long finished drill runs, resolved findings, ended rollout plans, trigger evaluations and finished deliveries are kept (a `duration`, 24h–87600h)", (*durationValue)(&c.Retention)},
		{"etcd-ca-file", "SWITCHYARD_ETCD_CA_FILE", "PEM `file` of the CA etcd's certificate is checked against (set: TLS to etcd)", (*stringValue)(&c.Etcd.CAFile)},
		{"etcd-cert-file", "SWITCHYARD_ETCD_CERT_FILE", "PEM client certificate `file` for etcd", (*stringValue)(&c.Etcd.CertFile)},
		{"etcd-key-file", "SWITCHYARD_ETCD_KEY_FILE", "PEM `file` of the client certificate's key", (*stringValue)(&c.Etcd.KeyFile)},
		{"etcd-server-name", "SWITCHYARD_ETCD_SERVER_NAME", "`name` etcd's certificate must carry, when not the endpoint's host", (*stringValue)(&c.Etcd.ServerName)},
		{"etcd-username", "SWITCHYARD_ETCD_USERNAME", "etcd user `name` (auth enabled; see console etcd init-auth)", (*stringValue)(&c.Etcd.Username)},
		{"etcd-password", "SWITCHYARD_ETCD_PASSWORD", "etcd user's password", secretValue{(*stringValue)(&c.Etcd.Password), false}},
		{"tls-cert", "SWITCHYARD_TLS_CERT", "PEM certificate `file` (chain) to serve HTTPS with; reloaded when it changes", (*stringValue)(&c.TLSCert)},
		{"tls-key", "SWITCHYARD_TLS_KEY", "PEM key `file` of --tls-cert", (*stringValue)(&c.TLSKey)},
		{"secret-key-file", "SWITCHYARD_SECRET_KEY_FILE", "key `file` sealing channel secrets and probe headers at rest; first line seals, every line opens (empty: generated in the data dir on the embedded defaults)", (*stringValue)(&c.SecretKeyFile)},
		{"egress-allow", "SWITCHYARD_EGRESS_ALLOW", "comma-separated `CIDRs or host:port` drill probes and webhooks may reach although private, loopback, link-local or the console's own (default none)", (*listValue)(&c.EgressAllow)},
		{"oidc-issuer", "SWITCHYARD_OIDC_ISSUER", "issuer `URL` of the OpenID Connect identity provider for single sign-on to the web console (empty: local accounts only)", (*stringValue)(&c.OIDC.Issuer)},
		{"oidc-client-id", "SWITCHYARD_OIDC_CLIENT_ID", "OAuth client `id` registered at the identity provider", (*stringValue)(&c.OIDC.ClientID)},
		{"oidc-client-secret", "SWITCHYARD_OIDC_CLIENT_SECRET", "OAuth client secret (unset: a public client, PKCE only)", secretValue{(*stringValue)(&c.OIDC.ClientSecret), false}},
		{"oidc-scopes", "SWITCHYARD_OIDC_SCOPES", "comma-separated `scopes` to ask for (default openid,profile,email,groups)", (*listValue)(&c.OIDC.Scopes)},
		{"oidc-groups-claim", "SWITCHYARD_OIDC_GROUPS_CLAIM", "`claim` holding the groups, read from the ID token or else UserInfo", (*stringValue)(&c.OIDC.GroupsClaim)},
		{"oidc-rules-file", "SWITCHYARD_OIDC_RULES_FILE", "JSON `file` of rules mapping groups to a role and app grants: [{\"group\":\"sre\",\"role\":\"admin\"}, …]", (*stringValue)(&c.OIDC.RulesFile)},
		{"oidc-default-role", "SWITCHYARD_OIDC_DEFAULT_ROLE", "`role` of a person no rule maps (empty: refused, strict; or viewer)", (*stringValue)(&c.OIDC.DefaultRole)},
		{"oidc-redirect-url", "SWITCHYARD_OIDC_REDIRECT_URL", "callback `URL` registered at the identity provider (default: this console's URL as the browser reached it + /ui/login/oidc/callback)", (*stringValue)(&c.OIDC.RedirectURL)},
		{"oidc-name", "SWITCHYARD_OIDC_NAME", "what the sign-in button names: \"Sign in with `name`\"", (*stringValue)(&c.OIDC.Name)},
		{"allow-self-approval", "SWITCHYARD_ALLOW_SELF_APPROVAL", "let the author of a change request approve it (`true` or false; default false: another person must)", (*boolValue)(&c.SelfApproval)},
		{"request-ttl", "SWITCHYARD_REQUEST_TTL", "how long a change request may wait to be applied before it expires (a `duration`)", (*durationValue)(&c.RequestTTL)},
		{"local-sign-in", "SWITCHYARD_LOCAL_SIGN_IN", "who may sign in with a password while single sign-on is on: all, admins, or break-glass (admins, only while the identity provider is unreachable)", (*stringValue)(&c.LocalSignIn)},
	}
}

// AddFlags registers the flags of the settings named in only (every
// setting when only is empty) on fs, with defaults taken from c (so call it
// after LoadEnv to let the environment set the defaults): --name, and
// --name-file for a secret. Each flag's usage names its environment twin.
// Parse with envconf.ParseFlags, which refuses a secret given both ways.
func (c *Config) AddFlags(fs *flag.FlagSet, only ...string) {
	for _, s := range c.settings() {
		if s.flag == "" || (len(only) > 0 && !slices.Contains(only, s.flag)) {
			continue
		}
		sv, secret := s.secret()
		if !secret || sv.valueFlag {
			fs.Var(s.value, s.flag, s.usage+" ($"+s.env+")")
		}
		if secret {
			envconf.SecretFileVar(fs, sv.Value, s.flag, "`file` holding the "+strings.ReplaceAll(s.usage, "`", "")+" ($"+s.env+envconf.FileSuffix+")")
		}
	}
}

// WriteEnvOnly describes, for -h, the variables whose value has no flag.
func (c *Config) WriteEnvOnly(w io.Writer) {
	for _, s := range c.settings() {
		sv, secret := s.secret()
		switch {
		case secret && !sv.valueFlag:
			fmt.Fprintf(w, "  %s\n    \t%s (or a file: %s%s, --%s-file)\n", s.env, s.usage, s.env, envconf.FileSuffix, s.flag)
		case s.flag == "":
			fmt.Fprintf(w, "  %s\n    \t%s\n", s.env, s.usage)
		}
	}
}

// LoadEnv overrides fields from SWITCHYARD_* environment variables, and
// secrets from the files their *_FILE variables name.
func (c *Config) LoadEnv(getenv func(string) string) error {
	e := envconf.New(getenv)
	for _, s := range c.settings() {
		if _, secret := s.secret(); secret {
			e.Secret(s.env, s.value.Set)
		} else {
			e.Parse(s.env, s.value.Set)
		}
	}
	if err := e.Err(); err != nil {
		return errors.New(strings.ReplaceAll(err.Error(), "\n", "; ")) // one line
	}
	return nil
}

// FromEnv is LoadEnv on the process environment.
func (c *Config) FromEnv() error { return c.LoadEnv(os.Getenv) }

// settingName is how an operator sets the setting of flag name:
// "--listen or SWITCHYARD_LISTEN"; a secret without a value flag:
// "SWITCHYARD_BOOTSTRAP_TOKEN (or its _FILE, --bootstrap-token-file)".
func settingName(flagName string) string {
	for _, s := range (&Config{}).settings() {
		sv, secret := s.secret()
		switch {
		case s.flag != flagName:
		case secret && !sv.valueFlag:
			return s.env + " (or its " + envconf.FileSuffix + ", --" + s.flag + "-file)"
		default:
			return "--" + s.flag + " or " + s.env
		}
	}
	return "--" + flagName
}

// prometheus is the configuration of the Prometheus source.
func (c *Config) prometheus() signal.PrometheusConfig {
	return signal.PrometheusConfig{Address: c.PrometheusURL, Timeout: c.PrometheusTimeout, BearerToken: c.PrometheusToken}
}

// Values for flag.Var and environment parsing.
type (
	stringValue   string
	durationValue time.Duration
	int64Value    int64
	boolValue     bool
	listValue     []string
)

func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }
func (v *stringValue) String() string     { return string(*v) }

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*v = durationValue(d)
	return nil
}
func (v *durationValue) String() string { return time.Duration(*v).String() }

func (v *int64Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return err
	}
	*v = int64Value(n)
	return nil
}
func (v *int64Value) String() string { return strconv.FormatInt(int64(*v), 10) }

func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v = boolValue(b)
	return nil
}
func (v *boolValue) String() string   { return strconv.FormatBool(bool(*v)) }
func (v *boolValue) IsBoolFlag() bool { return true }

func (v *listValue) Set(s string) error { *v = envconf.SplitList(s); return nil }
func (v *listValue) String() string     { return strings.Join(*v, ",") }

// Validate checks the configuration before anything starts. Its error is
// one line: each problem, naming the flag and variable that set it, joined
// by "; ".
func (c *Config) Validate() error {
	var errs []string
	bad := func(flagName, format string, args ...any) {
		errs = append(errs, settingName(flagName)+": "+fmt.Sprintf(format, args...))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port", c.Listen)
	}
	if !wire.ValidName(c.Namespace) {
		bad("namespace", "%q must match %s", c.Namespace, wire.NamePattern)
	}
	if len(c.EtcdEndpoints) == 0 && c.DataDir == "" {
		bad("data-dir", "required for the embedded etcd")
	}
	if c.DatabaseURL == "" && c.DataDir == "" {
		bad("data-dir", "required for the embedded SQLite database")
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		bad("database-url", "must be a postgres:// URL or empty")
	}
	if c.ReconcileInterval < 100*time.Millisecond {
		bad("reconcile-interval", "must be at least 100ms")
	}
	if c.PublishWait <= 0 || c.PublishWait > 30*time.Second {
		bad("publish-wait", "must be between 1ns and 30s")
	}
	if c.RequestTimeout <= c.PublishWait || c.RequestTimeout > 5*time.Minute {
		bad("request-timeout", "must be longer than publish-wait and at most 5m")
	}
	if c.ElectionTTL < time.Second || c.ElectionTTL > time.Minute || c.ElectionTTL%time.Second != 0 {
		bad("election-ttl", "must be whole seconds from 1s to 1m (etcd leases count seconds)")
	}
	if c.PrometheusURL != "" {
		if err := c.prometheus().Validate(); err != nil {
			bad("prometheus-url", "%v", err)
		}
	}
	if c.ExpiryInterval < 100*time.Millisecond || c.ExpiryInterval > 10*time.Minute {
		bad("expiry-interval", "must be between 100ms and 10m")
	}
	if c.ExpiryRemindBefore < 0 || c.ExpiryRemindBefore > 30*24*time.Hour {
		bad("expiry-remind-before", "must be between 0 and 720h")
	}
	if c.ExpiryEscalateAfter < 0 || c.ExpiryEscalateAfter > 30*24*time.Hour {
		bad("expiry-escalate-after", "must be between 0 and 720h")
	}
	if c.NotifyTimeout < time.Second || c.NotifyTimeout > time.Minute {
		bad("notify-timeout", "must be between 1s and 1m")
	}
	if c.CheckpointEvents < 1 || c.CheckpointEvents > 1_000_000 {
		bad("checkpoint-events", "must be between 1 and 1000000")
	}
	if c.CheckpointInterval < time.Second || c.CheckpointInterval > 24*time.Hour {
		bad("checkpoint-interval", "must be between 1s and 24h")
	}
	if c.TriggerInterval < 100*time.Millisecond || c.TriggerInterval > 10*time.Minute {
		bad("trigger-interval", "must be between 100ms and 10m")
	}
	if c.Retention < 24*time.Hour || c.Retention > 10*365*24*time.Hour {
		bad("retention", "must be between 24h and 87600h (10 years)")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		bad("tls-cert", "--tls-cert and --tls-key go together")
	}
	if err := c.Etcd.Validate(); err != nil {
		bad("etcd-username", "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if _, err := egress.New(egress.Config{Allow: c.EgressAllow}); err != nil {
		bad("egress-allow", "%v", err)
	}
	for _, e := range c.validateSSO() {
		bad(e.flag, "%s", e.msg)
	}
	if c.RequestTTL < time.Minute || c.RequestTTL > 7*24*time.Hour {
		bad("request-ttl", "must be between 1m and 168h")
	}
	if c.BootstrapToken != "" && len(c.BootstrapToken) < 16 {
		errs = append(errs, settingName("bootstrap-token")+": must be at least 16 characters")
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}
