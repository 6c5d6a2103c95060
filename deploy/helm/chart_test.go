// Package helm holds the Switchyard Helm chart (switchyard/); its test
// renders the chart with the Helm library for several values files, decodes
// every object strictly into its Kubernetes API type and checks the
// invariants production relies on.
package helm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart writes; strict decoding rejects anything else.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// manifests is one rendering, every object decoded into its type.
type manifests struct {
	text            string // every rendered document, for the secret scan
	deployments     []appsv1.Deployment
	daemonSets      []appsv1.DaemonSet
	services        []corev1.Service
	secrets         []corev1.Secret
	ingresses       []networkingv1.Ingress
	pdbs            []policyv1.PodDisruptionBudget
	networkPolicies []networkingv1.NetworkPolicy
	serviceMonitors []serviceMonitor
}

// render renders the chart with the values of file (under testdata
// unless absolute),
// advertising the monitoring.coreos.com/v1 API when monitoring is set.
func render(t *testing.T, file string, monitoring bool) (*manifests, error) {
	t.Helper()
	ch, err := loader.Load("switchyard")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join("testdata", file)
	}
	vals, err := chartutil.ReadValuesFile(file)
	if err != nil {
		t.Fatal(err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	if monitoring {
		caps.APIVersions = append(caps.APIVersions, "monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor")
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "sy", Namespace: "switchyard", IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	out, err := engine.Engine{Strict: true}.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	slices.Sort(names)
	m := &manifests{}
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		for _, doc := range strings.Split(out[name], "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			m.text += doc + "\n"
			if err := m.decode([]byte(doc)); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
		}
	}
	return m, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// decode decodes one document strictly (unknown or duplicate fields fail)
// into the type of its kind.
func (m *manifests) decode(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	strict := func(dst any) error { return yaml.UnmarshalStrict(doc, dst) }
	switch tm.APIVersion + "/" + tm.Kind {
	case "apps/v1/Deployment":
		return appendDecoded(&m.deployments, strict)
	case "apps/v1/DaemonSet":
		return appendDecoded(&m.daemonSets, strict)
	case "v1/Service":
		return appendDecoded(&m.services, strict)
	case "v1/Secret":
		return appendDecoded(&m.secrets, strict)
	case "networking.k8s.io/v1/Ingress":
		return appendDecoded(&m.ingresses, strict)
	case "policy/v1/PodDisruptionBudget":
		return appendDecoded(&m.pdbs, strict)
	case "networking.k8s.io/v1/NetworkPolicy":
		return appendDecoded(&m.networkPolicies, strict)
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return appendDecoded(&m.serviceMonitors, strict)
	}
	return fmt.Errorf("unexpected object %s %s", tm.APIVersion, tm.Kind)
}

func appendDecoded[T any](list *[]T, strict func(any) error) error {
	var v T
	if err := strict(&v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

func mustRender(t *testing.T, file string, monitoring bool) *manifests {
	t.Helper()
	m, err := render(t, file, monitoring)
	if err != nil {
		t.Fatalf("render %s: %v", file, err)
	}
	return m
}

// TestChart renders each values file and checks the invariants every
// rendering must keep.
func TestChart(t *testing.T) {
	for _, tc := range []struct {
		file       string
		monitoring bool
	}{
		{"defaults.yaml", false},
		{"external-tls.yaml", false},
		{"agent-netpol.yaml", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m := mustRender(t, tc.file, tc.monitoring)
			if len(m.deployments) != 1 {
				t.Fatalf("%d Deployments, want 1", len(m.deployments))
			}
			d := m.deployments[0]
			checkPods(t, "Deployment "+d.Name, d.Spec.Template.Spec)
			for _, ds := range m.daemonSets {
				checkPods(t, "DaemonSet "+ds.Name, ds.Spec.Template.Spec)
			}
			checkPDB(t, m)
			checkServices(t, m)
			if got := len(m.serviceMonitors); got != map[bool]int{false: 0, true: 1}[tc.monitoring] {
				t.Errorf("%d ServiceMonitors with monitoring.coreos.com/v1 %v", got, tc.monitoring)
			}
		})
	}
}

// checkPods: every container has a liveness probe that is not /readyz, a
// readiness probe, resources, runAsNonRoot and a read-only root filesystem
// (with every path it writes on a volume), and takes no Secret as an
// environment value.
func checkPods(t *testing.T, what string, pod corev1.PodSpec) {
	t.Helper()
	if len(pod.Containers) == 0 {
		t.Fatalf("%s: no containers", what)
	}
	podNonRoot := pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot
	for _, c := range pod.Containers {
		where := what + " container " + c.Name
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil {
			t.Errorf("%s: no HTTP liveness probe", where)
		} else if c.LivenessProbe.HTTPGet.Path == "/readyz" {
			t.Errorf("%s: liveness on /readyz restarts every pod when etcd or the database is down", where)
		} else if c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: liveness on %s, want the process-only /healthz", where, c.LivenessProbe.HTTPGet.Path)
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: readiness is not an HTTP probe of /readyz", where)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: resources %+v lack a cpu/memory request or a memory limit", where, c.Resources)
		}
		sc := c.SecurityContext
		nonRoot := podNonRoot || (sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot)
		if !nonRoot || sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: runAsNonRoot not set on the container", where)
		}
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: root filesystem not read-only", where)
		}
		mounted := map[string]bool{}
		for _, vm := range c.VolumeMounts {
			mounted[vm.MountPath] = true
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				t.Errorf("%s: %s is a Secret as an environment value; secrets are files (its _FILE setting)", where, e.Name)
			}
			if (e.Name == "SWITCHYARD_DATA_DIR" || e.Name == "SWITCHYARD_AGENT_SNAPSHOT_DIR") && !mounted[e.Value] {
				t.Errorf("%s: %s=%s is not a mounted volume on a read-only root", where, e.Name, e.Value)
			}
		}
	}
}

// checkPDB: the PodDisruptionBudget selects the console Deployment's pods
// and only those (not the agent's).
func checkPDB(t *testing.T, m *manifests) {
	t.Helper()
	if len(m.pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets, want 1", len(m.pdbs))
	}
	sel, err := metav1.LabelSelectorAsSelector(m.pdbs[0].Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	d := m.deployments[0]
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("PDB selector %v does not select the Deployment's pods %v", sel, d.Spec.Template.Labels)
	}
	for _, ds := range m.daemonSets {
		if sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
			t.Errorf("PDB selector %v also selects the agent's pods", sel)
		}
	}
}

// checkServices: each Service selects the pods of exactly one workload.
func checkServices(t *testing.T, m *manifests) {
	t.Helper()
	pods := map[string]map[string]string{"console": m.deployments[0].Spec.Template.Labels}
	for _, ds := range m.daemonSets {
		pods["agent"] = ds.Spec.Template.Labels
	}
	for _, s := range m.services {
		n := 0
		for _, l := range pods {
			if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(l)) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("Service %s selects %d workloads, want 1", s.Name, n)
		}
	}
}

// TestChartDefaults: two consoles, no chart-made Secret (the database
// Secret exists), no Ingress or NetworkPolicy unless asked for, and no
// ServiceMonitor where the cluster has no monitoring.coreos.com/v1.
func TestChartDefaults(t *testing.T) {
	m := mustRender(t, "defaults.yaml", false)
	if r := m.deployments[0].Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("replicas %v, want 2", r)
	}
	if len(m.secrets)+len(m.ingresses)+len(m.networkPolicies)+len(m.daemonSets) != 0 {
		t.Errorf("defaults rendered %d Secrets, %d Ingresses, %d NetworkPolicies, %d DaemonSets; want none",
			len(m.secrets), len(m.ingresses), len(m.networkPolicies), len(m.daemonSets))
	}
	pod := m.deployments[0].Spec.Template.Spec
	env := envOf(pod.Containers[0])
	files := secretFiles(pod, pod.Containers[0])
	if env["SWITCHYARD_ETCD_ENDPOINTS"].Value == "" || files[env["SWITCHYARD_DATABASE_URL_FILE"].Value] != (secretKey{"switchyard-db", "database-url"}) {
		t.Errorf("console env lacks the external etcd or the database Secret's file: %v", env)
	}
}

// secretKey is a key of a Kubernetes Secret.
type secretKey struct{ secret, key string }

// secretFiles maps each file c sees on a read-only Secret volume (plain or
// projected) to the Secret key it holds.
func secretFiles(pod corev1.PodSpec, c corev1.Container) map[string]secretKey {
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	files := map[string]secretKey{}
	add := func(dir string, s *corev1.SecretProjection) {
		for _, item := range s.Items {
			files[dir+"/"+item.Path] = secretKey{s.Name, item.Key}
		}
	}
	for _, vm := range c.VolumeMounts {
		v := volumes[vm.Name]
		switch {
		case !vm.ReadOnly:
		case v.Secret != nil:
			add(vm.MountPath, &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: v.Secret.SecretName}, Items: v.Secret.Items})
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add(vm.MountPath, src.Secret)
				}
			}
		}
	}
	return files
}

// TestChartRequiresExternalStores: without etcd endpoints or a database the
// chart refuses to render (it never falls back to an embedded etcd or
// SQLite), naming the missing value.
func TestChartRequiresExternalStores(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ values, want string }{
		{"database: {existingSecret: db}\n", "etcd.endpoints is required"},
		{"etcd: {endpoints: [http://etcd:2379]}\n", "database.existingSecret (or database.url) is required"},
		{"etcd: {endpoints: [http://e:2379]}\ndatabase: {existingSecret: db}\nagent: {daemonset: {enabled: true}}\n", "agent.app is required"},
	} {
		file := filepath.Join(dir, "v.yaml")
		if err := os.WriteFile(file, []byte(tc.values), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := render(t, file, false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %q: error %v, want %q", tc.values, err, tc.want)
		}
	}
}

// TestChartExistingSecrets: with every secret named as an existing Secret,
// the chart creates none and no secret value (the sentinels given inline
// beside them) reaches a manifest; every secret (database URL, bootstrap
// and Prometheus tokens, sealing and audit keys, etcd's TLS material and
// password) is a mounted file the console is pointed at.
func TestChartExistingSecrets(t *testing.T) {
	m := mustRender(t, "external-tls.yaml", false)
	if len(m.secrets) != 0 {
		t.Errorf("the chart created %d Secrets although existing ones are named", len(m.secrets))
	}
	for _, sentinel := range []string{"sentinel-db-password", "sentinel-db-user", "sentinel-bootstrap-token"} {
		if strings.Contains(m.text, sentinel) {
			t.Errorf("secret value %q appears in the rendered manifests", sentinel)
		}
	}
	pod := m.deployments[0].Spec.Template.Spec
	env := envOf(pod.Containers[0])
	files := secretFiles(pod, pod.Containers[0])
	// Each *_FILE setting names a file on a read-only mount of the Secret.
	for name, want := range map[string]secretKey{
		"SWITCHYARD_DATABASE_URL_FILE":     {"switchyard-db", "database-url"},
		"SWITCHYARD_BOOTSTRAP_TOKEN_FILE":  {"switchyard-bootstrap", "bootstrap-token"},
		"SWITCHYARD_PROMETHEUS_TOKEN_FILE": {"switchyard-prometheus", "token"},
		"SWITCHYARD_SECRET_KEY_FILE":       {"switchyard-keys", "secret.key"},
		"SWITCHYARD_AUDIT_KEY_FILE":        {"switchyard-keys", "audit-signing.key"},
		"SWITCHYARD_ETCD_CA_FILE":          {"switchyard-etcd-client", "ca.crt"},
		"SWITCHYARD_ETCD_CERT_FILE":        {"switchyard-etcd-client", "tls.crt"},
		"SWITCHYARD_ETCD_KEY_FILE":         {"switchyard-etcd-client", "tls.key"},
		"SWITCHYARD_ETCD_PASSWORD_FILE":    {"switchyard-etcd-auth", "password"},
	} {
		if path := env[name].Value; files[path] != want {
			t.Errorf("%s=%q is %+v, want a read-only file of Secret %s key %s", name, path, files[path], want.secret, want.key)
		}
	}
	if len(m.ingresses) != 1 || len(m.ingresses[0].Spec.TLS) != 1 {
		t.Errorf("want one Ingress with TLS, got %+v", m.ingresses)
	}
}

// TestChartCreatedSecret: inline values go into the one Secret the chart
// creates, and the console reads them from it.
func TestChartCreatedSecret(t *testing.T) {
	m := mustRender(t, "agent-netpol.yaml", true)
	if len(m.secrets) != 1 {
		t.Fatalf("%d Secrets, want the chart's one", len(m.secrets))
	}
	s := m.secrets[0]
	pod := m.deployments[0].Spec.Template.Spec
	env := envOf(pod.Containers[0])
	files := secretFiles(pod, pod.Containers[0])
	for name, want := range map[string]string{
		"SWITCHYARD_DATABASE_URL_FILE":    "postgres://switchyard:inline-db-password@db.internal:5432/switchyard",
		"SWITCHYARD_BOOTSTRAP_TOKEN_FILE": "inline-bootstrap-token-0123456789",
	} {
		if f, ok := files[env[name].Value]; !ok || f.secret != s.Name || s.StringData[f.key] != want {
			t.Errorf("%s does not name a file holding %q from Secret %s", name, want, s.Name)
		}
	}
}

// TestChartAgentDaemonSet: one agent per node on the node-local Service,
// its app and node-named instance set, the snapshot on a volume.
func TestChartAgentDaemonSet(t *testing.T) {
	m := mustRender(t, "agent-netpol.yaml", true)
	if len(m.daemonSets) != 1 {
		t.Fatalf("%d DaemonSets, want 1", len(m.daemonSets))
	}
	env := envOf(m.daemonSets[0].Spec.Template.Spec.Containers[0])
	if env["SWITCHYARD_AGENT_APP"].Value != "checkout" || env["SWITCHYARD_AGENT_INSTANCE_ID"].ValueFrom == nil {
		t.Errorf("agent env %v lacks its app or instance", env)
	}
	local := false
	for _, s := range m.services {
		if p := s.Spec.InternalTrafficPolicy; p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal {
			local = true
		}
	}
	if !local {
		t.Error("no node-local Service for the agent")
	}
}

// TestChartNetworkPolicy: the policy holds the console pods only; ingress
// is the console port alone (from the named peers); egress is DNS, etcd,
// the database, Prometheus and the allowlisted targets, each rule bound to
// its ports, nothing else.
func TestChartNetworkPolicy(t *testing.T) {
	m := mustRender(t, "agent-netpol.yaml", true)
	if len(m.networkPolicies) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1", len(m.networkPolicies))
	}
	np := m.networkPolicies[0]
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(m.deployments[0].Spec.Template.Labels)) || sel.Matches(labels.Set(m.daemonSets[0].Spec.Template.Labels)) {
		t.Errorf("policy selector %v must hold the console pods and not the agent's", sel)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || ports(np.Spec.Ingress[0].Ports) != "TCP/http" {
		t.Errorf("ingress %+v, want the http port from the one named peer", np.Spec.Ingress)
	}
	var got []string
	for _, r := range np.Spec.Egress {
		if len(r.Ports) == 0 || len(r.To) == 0 {
			t.Errorf("egress rule %+v opens every port or every destination", r)
		}
		got = append(got, ports(r.Ports))
	}
	want := []string{"UDP/53,TCP/53", "TCP/2379", "TCP/5432", "TCP/9090", "TCP/443"}
	if !slices.Equal(got, want) {
		t.Errorf("egress ports %v, want %v", got, want)
	}
}

func ports(ps []networkingv1.NetworkPolicyPort) string {
	var s []string
	for _, p := range ps {
		proto := "TCP"
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		s = append(s, proto+"/"+p.Port.String())
	}
	return strings.Join(s, ",")
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	return env
}
