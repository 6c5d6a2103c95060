// Package deploy holds the configuration of the production-shaped compose
// demo; its test checks the shape of docker-compose.yml without a Docker
// engine.
package deploy_test

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type compose struct {
	Services map[string]struct {
		Image       string            `json:"image"`
		Build       any               `json:"build"`
		Environment map[string]string `json:"environment"`
		Volumes     []string          `json:"volumes"`
		Secrets     []string          `json:"secrets"`
	} `json:"services"`
	Secrets map[string]struct {
		File string `json:"file"`
	} `json:"secrets"`
}

// load reads docker-compose.yml.
func load(t *testing.T) (compose, []byte) {
	t.Helper()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c, raw
}

// secretFile is the content of the Docker secret a service reads at path
// /run/secrets/<name> (its *_FILE setting), without the trailing newline,
// after checking that the service is given that secret.
func (c compose) secretFile(t *testing.T, service, path string) string {
	t.Helper()
	name, ok := strings.CutPrefix(path, "/run/secrets/")
	if !ok || !slices.Contains(c.Services[service].Secrets, name) {
		t.Fatalf("%s reads %q, not one of its secrets %v", service, path, c.Services[service].Secrets)
	}
	def, ok := c.Secrets[name]
	if !ok || def.File == "" {
		t.Fatalf("secret %s is not defined from a file", name)
	}
	b, err := os.ReadFile(filepath.Join("..", def.File))
	if err != nil {
		t.Fatalf("secret %s: %v", name, err)
	}
	return strings.TrimRight(string(b), "\n")
}

// TestComposeShape: three etcd members in one cluster, Postgres, two
// console replicas on the same database and etcd, the demo service on the
// same etcd and namespace, Prometheus scraping the consoles and the demo.
func TestComposeShape(t *testing.T) {
	c, _ := load(t)
	for _, name := range []string{"etcd1", "etcd2", "etcd3"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		if s.Environment["ETCD_NAME"] != name || !strings.Contains(s.Environment["ETCD_INITIAL_CLUSTER"], "etcd3=http://etcd3:2380") {
			t.Errorf("%s is not a member of the three-node cluster: %v", name, s.Environment)
		}
	}
	if _, ok := c.Services["postgres"]; !ok {
		t.Fatal("no postgres service")
	}
	var dbURL string
	for _, name := range []string{"console-a", "console-b"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		env := s.Environment
		if env["SWITCHYARD_ETCD_ENDPOINTS"] != "http://etcd1:2379,http://etcd2:2379,http://etcd3:2379" {
			t.Errorf("%s etcd endpoints %q", name, env["SWITCHYARD_ETCD_ENDPOINTS"])
		}
		url := c.secretFile(t, name, env["SWITCHYARD_DATABASE_URL_FILE"])
		if !strings.HasPrefix(url, "postgres://") || (dbURL != "" && url != dbURL) {
			t.Errorf("%s database %q", name, url)
		}
		dbURL = url
	}
	demo, ok := c.Services["checkout"]
	if !ok {
		t.Fatal("no checkout demo service")
	}
	if env, console := demo.Environment, c.Services["console-a"].Environment; env["SWITCHYARD_ETCD_ENDPOINTS"] != console["SWITCHYARD_ETCD_ENDPOINTS"] ||
		env["SWITCHYARD_NAMESPACE"] != console["SWITCHYARD_NAMESPACE"] || env["SWITCHYARD_APP"] != "checkout" {
		t.Errorf("the demo does not watch what the consoles publish: %v", env)
	}
	if _, ok := c.Services["prometheus"]; !ok {
		t.Fatal("no prometheus service")
	}
	prom, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"console-a:8080", "console-b:8080", "checkout:8070"} {
		if !strings.Contains(string(prom), target) {
			t.Errorf("prometheus does not scrape %s", target)
		}
	}
}

// TestComposeWiring: the consoles query the compose file's Prometheus, and
// every service that keeps snapshots in a named volume at
// /var/lib/switchyard runs an image that creates that directory owned by
// its runtime user (a fresh named volume copies the image's directory;
// without it the mount is root-owned and the non-root process cannot
// write its snapshots).
func TestComposeWiring(t *testing.T) {
	c, raw := load(t)
	for _, name := range []string{"console-a", "console-b"} {
		if got := c.Services[name].Environment["SWITCHYARD_PROMETHEUS_URL"]; got != "http://prometheus:9090" {
			t.Errorf("%s: SWITCHYARD_PROMETHEUS_URL %q, want the compose Prometheus http://prometheus:9090", name, got)
		}
	}
	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	final := string(dockerfile)[strings.LastIndex(string(dockerfile), "\nFROM "):]
	user := ""
	for _, line := range strings.Split(final, "\n") {
		if u, ok := strings.CutPrefix(line, "USER "); ok {
			user = strings.TrimSpace(u)
		}
	}
	if user != "nonroot" {
		t.Fatalf("the image runs as %q; this test knows distroless nonroot (65532)", user)
	}
	creates := false
	for _, line := range strings.Split(final, "\n") {
		if strings.HasPrefix(line, "COPY ") && strings.Contains(line, "--chown=65532:65532") && strings.HasSuffix(strings.TrimSpace(line), " /var/lib/switchyard") {
			creates = true
		}
	}
	if !creates {
		t.Error("the final image does not create /var/lib/switchyard owned by nonroot (65532)")
	}
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			if strings.HasSuffix(v, ":/var/lib/switchyard") && s.Image != "switchyard/console:dev" {
				t.Errorf("%s mounts /var/lib/switchyard from an image other than the one built here: %s", name, s.Image)
			}
		}
	}
	if !strings.Contains(string(raw), "/var/lib/switchyard") {
		t.Error("no service keeps snapshots in /var/lib/switchyard")
	}
}

// TestComposeSecrets: no secret is an environment value. The consoles read
// the database URL and the bootstrap token from Docker secrets
// (SWITCHYARD_*_FILE), Postgres its password (POSTGRES_PASSWORD_FILE), and
// the URL's password is Postgres's.
func TestComposeSecrets(t *testing.T) {
	c, _ := load(t)
	for name, s := range c.Services {
		for k := range s.Environment {
			if k == "ETCD_INITIAL_CLUSTER_TOKEN" { // names the cluster; no secret
				continue
			}
			if (strings.Contains(k, "PASSWORD") || strings.Contains(k, "TOKEN") || strings.HasSuffix(k, "DATABASE_URL")) && !strings.HasSuffix(k, "_FILE") {
				t.Errorf("%s: secret %s is an environment value; use %s_FILE and a Docker secret", name, k, k)
			}
		}
	}
	pgPassword := c.secretFile(t, "postgres", c.Services["postgres"].Environment["POSTGRES_PASSWORD_FILE"])
	for _, name := range []string{"console-a", "console-b"} {
		env := c.Services[name].Environment
		u, err := url.Parse(c.secretFile(t, name, env["SWITCHYARD_DATABASE_URL_FILE"]))
		if err != nil {
			t.Fatalf("%s: database URL: %v", name, err)
		}
		if pw, _ := u.User.Password(); u.User.Username() != c.Services["postgres"].Environment["POSTGRES_USER"] || pw != pgPassword {
			t.Errorf("%s: the database URL's user and password are not Postgres's", name)
		}
		if token := c.secretFile(t, name, env["SWITCHYARD_BOOTSTRAP_TOKEN_FILE"]); len(token) < 16 {
			t.Errorf("%s: bootstrap token of %d characters; the console wants at least 16", name, len(token))
		}
	}
}
