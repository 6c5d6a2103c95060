package console

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"bad listen", func(c *Config) { c.Listen = "8080" }, "listen"},
		{"bad namespace", func(c *Config) { c.Namespace = "Prod!" }, "namespace"},
		{"mysql url", func(c *Config) { c.DatabaseURL = "mysql://x" }, "database-url"},
		{"no data dir for embedded", func(c *Config) { c.DataDir = "" }, "data-dir"},
		{"external everything needs no data dir", func(c *Config) {
			c.DataDir, c.DatabaseURL, c.EtcdEndpoints = "", "postgres://db/x", []string{"http://etcd:2379"}
		}, ""},
		{"tiny reconcile", func(c *Config) { c.ReconcileInterval = time.Millisecond }, "reconcile-interval"},
		{"short bootstrap token", func(c *Config) { c.BootstrapToken = "abc" }, "SWITCHYARD_BOOTSTRAP_TOKEN"},
		{"fractional election ttl", func(c *Config) { c.ElectionTTL = 1500 * time.Millisecond }, "--election-ttl or SWITCHYARD_ELECTION_TTL"},
		{"zero election ttl", func(c *Config) { c.ElectionTTL = 0 }, "election-ttl"},
		{"tls cert without key", func(c *Config) { c.TLSCert = "cert.pem" }, "--tls-cert or SWITCHYARD_TLS_CERT"},
		{"etcd user without password", func(c *Config) { c.Etcd.Username = "switchyard-console-default" }, "without a password"},
		{"etcd password and password file", func(c *Config) {
			c.Etcd.Username, c.Etcd.Password, c.Etcd.PasswordFile = "u", "p", "/run/pw"
		}, "give one"},
		{"etcd cert without key", func(c *Config) { c.Etcd.CertFile = "client.pem" }, "cert file and key file"},
		{"bad egress allow entry", func(c *Config) { c.EgressAllow = []string{"10.0.0.0/40"} }, "--egress-allow or SWITCHYARD_EGRESS_ALLOW"},
		{"retention under a day", func(c *Config) { c.Retention = time.Hour }, "--retention or SWITCHYARD_RETENTION"},
		{"retention of a year", func(c *Config) { c.Retention = 365 * 24 * time.Hour }, ""},
		{"oidc client id without issuer", func(c *Config) { c.OIDC.ClientID = "switchyard" }, "--oidc-issuer or SWITCHYARD_OIDC_ISSUER"},
		{"oidc without client id", func(c *Config) { c.OIDC.Issuer, c.OIDC.DefaultRole = "https://id.example.com", "viewer" }, "--oidc-client-id or SWITCHYARD_OIDC_CLIENT_ID"},
		{"oidc without rules or default role", func(c *Config) { c.OIDC.Issuer, c.OIDC.ClientID = "https://id.example.com", "sy" }, "--oidc-rules-file or SWITCHYARD_OIDC_RULES_FILE: is required"},
		{"oidc issuer not a URL", func(c *Config) { c.OIDC.Issuer, c.OIDC.ClientID, c.OIDC.DefaultRole = "id.example.com", "sy", "viewer" }, "--oidc-issuer"},
		{"oidc secret file missing", func(c *Config) {
			c.OIDC.Issuer, c.OIDC.ClientID, c.OIDC.DefaultRole, c.OIDC.ClientSecretFile = "https://id.example.com", "sy", "viewer", "/nonexistent/secret"
		}, "--oidc-client-secret-file"},
		{"oidc operator default role", func(c *Config) {
			c.OIDC.Issuer, c.OIDC.ClientID, c.OIDC.DefaultRole = "https://id.example.com", "sy", "operator"
		}, "--oidc-default-role"},
		{"oidc public client with a default role", func(c *Config) {
			c.OIDC.Issuer, c.OIDC.ClientID, c.OIDC.DefaultRole = "https://id.example.com", "sy", "viewer"
		}, ""},
		{"bad local sign-in", func(c *Config) { c.LocalSignIn = "never" }, "--local-sign-in or SWITCHYARD_LOCAL_SIGN_IN"},
		{"request ttl too short", func(c *Config) { c.RequestTTL = time.Second }, "--request-ttl"},
		{"several problems, one line", func(c *Config) { c.Listen, c.Namespace = "8080", "Prod!" },
			"--listen or SWITCHYARD_LISTEN: \"8080\" is not host:port; --namespace or SWITCHYARD_NAMESPACE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v does not mention %q", err, tc.want)
			}
		})
	}
}

func TestConfigEnvAndFlags(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "etcd-password")
	if err := os.WriteFile(pwFile, []byte("etcd-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"SWITCHYARD_LISTEN":             "0.0.0.0:9000",
		"SWITCHYARD_ETCD_ENDPOINTS":     "http://a:2379, http://b:2379",
		"SWITCHYARD_NAMESPACE":          "prod",
		"SWITCHYARD_RECONCILE_INTERVAL": "5s",
		"SWITCHYARD_ETCD_USERNAME":      "switchyard-console-prod",
		"SWITCHYARD_ETCD_PASSWORD_FILE": pwFile,
		"SWITCHYARD_ETCD_CA_FILE":       "/etc/etcd/ca.pem",
		"SWITCHYARD_SECRET_KEY_FILE":    "/run/secrets/keys",
		"SWITCHYARD_TLS_CERT":           "/etc/tls/cert.pem",
		"SWITCHYARD_EGRESS_ALLOW":       "10.1.0.0/16, checkout:8070",
		"SWITCHYARD_RETENTION":          "720h",
	}
	c := DefaultConfig()
	if err := c.LoadEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if c.Listen != "0.0.0.0:9000" || len(c.EtcdEndpoints) != 2 || c.EtcdEndpoints[1] != "http://b:2379" || c.Namespace != "prod" || c.ReconcileInterval != 5*time.Second || c.Retention != 720*time.Hour {
		t.Fatalf("env not applied: %+v", c)
	}
	if c.Etcd.Username != "switchyard-console-prod" || c.Etcd.Password != "etcd-s3cret" || c.Etcd.CAFile != "/etc/etcd/ca.pem" ||
		c.SecretKeyFile != "/run/secrets/keys" || c.TLSCert != "/etc/tls/cert.pem" || len(c.EgressAllow) != 2 || c.EgressAllow[1] != "checkout:8070" {
		t.Fatalf("security settings not applied: %+v", c)
	}
	if err := c.LoadEnv(func(k string) string {
		if k == "SWITCHYARD_PUBLISH_WAIT" {
			return "soon"
		}
		return ""
	}); err == nil || !strings.Contains(err.Error(), "SWITCHYARD_PUBLISH_WAIT") {
		t.Fatalf("bad duration in env: %v", err)
	}
	// Flags win over the environment; the flag's default shows the env value.
	c = DefaultConfig()
	if err := c.LoadEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse([]string{"--namespace", "staging", "--election-ttl", "3s", "--retention", "48h"}); err != nil {
		t.Fatal(err)
	}
	if c.Retention != 48*time.Hour {
		t.Fatalf("--retention over SWITCHYARD_RETENTION: %v", c.Retention)
	}
	if c.Namespace != "staging" || c.ElectionTTL != 3*time.Second || c.Listen != "0.0.0.0:9000" || fs.Lookup("listen").DefValue != "0.0.0.0:9000" {
		t.Fatalf("flags over env: %+v", c)
	}
}
