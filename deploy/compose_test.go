// Package deploy holds the configuration of the production-shaped compose
// demo; its test checks the shape of docker-compose.yml without a Docker
// engine.
package deploy_test

import (
	"os"
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
	} `json:"services"`
}

// TestComposeShape: three etcd members in one cluster, Postgres, two
// console replicas on the same database and etcd, the demo service on the
// same etcd and namespace, Prometheus scraping the consoles and the demo.
func TestComposeShape(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
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
		if !strings.HasPrefix(env["SWITCHYARD_DATABASE_URL"], "postgres://") || (dbURL != "" && env["SWITCHYARD_DATABASE_URL"] != dbURL) {
			t.Errorf("%s database %q", name, env["SWITCHYARD_DATABASE_URL"])
		}
		dbURL = env["SWITCHYARD_DATABASE_URL"]
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
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
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
