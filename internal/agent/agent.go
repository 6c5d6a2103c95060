package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Agent is one SDK client and the HTTP API that serves its answers.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	client *sdk.Client
	reg    *prometheus.Registry
	mux    *http.ServeMux
	ofrep  *ofrep // nil when the OFREP API is off

	mu      sync.RWMutex
	handles map[string]*sdk.Handle // only names that have been published, so the set stays bounded
}

// New validates cfg and starts the SDK client. Like sdk.New it does not
// wait for etcd. Call Close to release it.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Agent, error) {
	return newAgent(ctx, cfg, log, nil)
}

// newAgent is New with the clock of the OFREP limiter (nil: the system's).
func newAgent(ctx context.Context, cfg Config, log *slog.Logger, clock limit.Clock) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	if err := checkSnapshotDir(cfg.SnapshotDir); err != nil {
		return nil, fmt.Errorf("%s: %w", setting("snapshot-dir"), err)
	}
	a := &Agent{cfg: cfg, log: log, reg: prometheus.NewRegistry(), handles: map[string]*sdk.Handle{}}
	if cfg.OFREPOn() { // before the SDK client, so a bad token file is the only thing said
		var err error
		if a.ofrep, err = newOFREP(a, clock); err != nil {
			return nil, err
		}
	}
	sc := cfg.SDKConfig()
	sc.Registerer = a.reg
	sc.Logger = log
	c, err := sdk.New(ctx, sc)
	if err != nil {
		return nil, err
	}
	a.client = c
	a.mux = http.NewServeMux()
	a.mux.HandleFunc("GET /v1/switches", a.listSwitches)
	a.mux.HandleFunc("GET /v1/switches/{name}", a.getSwitch)
	a.mux.HandleFunc("GET /v1/limits", a.listLimits)
	a.mux.HandleFunc("GET /v1/limits/{resource...}", a.getLimit)
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	a.mux.HandleFunc("GET /readyz", a.readyz)
	a.mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeProblem(w, r, http.StatusMethodNotAllowed, "method not allowed", "the agent API is read-only")
			return
		}
		writeProblem(w, r, http.StatusNotFound, "not found", "no such endpoint; see GET /v1/switches, /v1/limits, /healthz, /readyz, /metrics")
	})
	return a, nil
}

// Client returns the agent's SDK client.
func (a *Agent) Client() *sdk.Client { return a.client }

// Handler returns the HTTP API.
func (a *Agent) Handler() http.Handler { return a.mux }

// Close stops the SDK client, which writes a final disk snapshot.
func (a *Agent) Close() error { return a.client.Close() }

// checkSnapshotDir creates dir if needed and proves a file can be written
// in it, so a bad --snapshot-dir stops the agent at start instead of
// failing every snapshot write later. Empty: no snapshot, nothing to check.
func checkSnapshotDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".agent-check-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// Run starts an agent, serves its API on cfg.Listen (and OFREP on
// cfg.OFREPListen) until ctx is done, then drains requests for at most
// cfg.ShutdownTimeout and closes it. The listeners are opened before the
// SDK client starts, so a port in use fails at once with the setting to
// change and nothing else logged.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	lns, err := listen(cfg)
	if err != nil {
		return err
	}
	defer func() {
		for _, ln := range lns {
			ln.Close() // after Shutdown this is a no-op
		}
	}()
	a, err := New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	servers := []*http.Server{{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second}}
	if len(lns) > 1 {
		servers = append(servers, &http.Server{Handler: a.OFREPHandler(), ReadHeaderTimeout: 5 * time.Second})
	}
	done := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { done <- srv.Serve(lns[i]) }()
	}
	attrs := []any{"addr", lns[0].Addr().String()}
	if len(lns) > 1 {
		attrs = append(attrs, "ofrep", lns[1].Addr().String())
	}
	log.Info("agent serving", append(attrs, "namespace", cfg.Namespace, "app", cfg.App,
		"instance", a.client.InstanceID(), "etcd", strings.Join(cfg.EtcdEndpoints, ","))...)
	var serveErr error
	select {
	case err := <-done:
		serveErr = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		log.Info("agent shutting down")
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil && serveErr == nil {
			serveErr = fmt.Errorf("shutdown: %w", err)
		}
	}
	return serveErr
}

// listen opens the JSON API's listener and, unless turned off, the OFREP
// one; an error names the setting to change.
func listen(cfg Config) ([]net.Listener, error) {
	addrs := map[string]string{"listen": cfg.Listen}
	names := []string{"listen"}
	if cfg.OFREPOn() {
		addrs["ofrep-listen"] = cfg.OFREPListen
		names = append(names, "ofrep-listen")
	}
	var lns []net.Listener
	for _, name := range names {
		ln, err := net.Listen("tcp", addrs[name])
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("%w (change %s)", err, setting(name))
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// handle returns the cached handle of a published switch, creating it on
// first use; nil when the name has no published value. Handles are made
// only for published names so that arbitrary request names cannot grow
// the SDK's name index. published is the current Switches() map when the
// caller already holds one, else nil.
func (a *Agent) handle(name string, published map[string]*wire.Switch) *sdk.Handle {
	a.mu.RLock()
	h := a.handles[name]
	a.mu.RUnlock()
	if h != nil {
		return h
	}
	if published == nil {
		published = a.client.Switches()
	}
	if _, ok := published[name]; !ok {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if h = a.handles[name]; h == nil {
		h = a.client.Switch(name, sdk.Default(false))
		a.handles[name] = h
	}
	return h
}

// switchSummary is one entry of GET /v1/switches.
type switchSummary struct {
	Name    string       `json:"name"`
	App     string       `json:"app"` // the switch's own app: the agent's, or "_global"
	Level   wire.Level   `json:"level"`
	State   string       `json:"state"`
	On      bool         `json:"on"` // for this instance (instance hash; no request key)
	Rollout wire.Rollout `json:"rollout"`
	Source  string       `json:"source"`
}

func (a *Agent) listSwitches(w http.ResponseWriter, r *http.Request) {
	all := a.client.Switches()
	out := make([]switchSummary, 0, len(all))
	for name, sw := range all {
		h := a.handle(name, all)
		out = append(out, switchSummary{Name: name, App: sw.App, Level: sw.Level, State: sw.State,
			On: h.On(r.Context()), Rollout: sw.Rollout, Source: h.Source().String()})
	}
	slices.SortFunc(out, func(x, y switchSummary) int { return strings.Compare(x.Name, y.Name) })
	writeJSON(w, http.StatusOK, map[string]any{
		"revision": a.client.Revision(),
		"stale":    a.client.Stale(),
		"switches": out,
	})
}

// switchAnswer is the body of GET /v1/switches/{name}.
type switchAnswer struct {
	Name         string          `json:"name"`
	On           bool            `json:"on"`
	Level        wire.Level      `json:"level,omitempty"`
	Fallback     json.RawMessage `json:"fallback,omitempty"`      // the L1 payload, raw JSON
	MaxStaleness string          `json:"max_staleness,omitempty"` // the L2 bound, a Go duration
	Source       string          `json:"source"`
}

func (a *Agent) getSwitch(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !wire.ValidName(name) {
		writeProblem(w, r, http.StatusBadRequest, "invalid switch name",
			fmt.Sprintf("name: %q is not a valid switch name", name))
		return
	}
	ctx := r.Context()
	if q := r.URL.Query(); q.Has("key") {
		ctx = sdk.WithKey(ctx, q.Get("key"))
	}
	ans := switchAnswer{Name: name}
	if h := a.handle(name, nil); h != nil {
		ans.On, ans.Source = h.On(ctx), h.Source().String()
		if sw := h.Value(); sw != nil {
			ans.Level, ans.Fallback = sw.Level, sw.Fallback
		}
		if d := h.MaxStaleness(); d > 0 {
			ans.MaxStaleness = d.String()
		}
	} else {
		// Never published: the SDK's fallback chain (environment, else off).
		ans.On, ans.Source = a.client.On(ctx, name), sdk.SourceDefault.String()
		if _, ok := os.LookupEnv(sdk.EnvVar(a.cfg.App, name)); ok {
			ans.Source = sdk.SourceEnv.String()
		}
	}
	writeJSON(w, http.StatusOK, ans)
}

func (a *Agent) listLimits(w http.ResponseWriter, _ *http.Request) {
	all := a.client.LimitRules()
	out := make([]*wire.LimitRule, 0, len(all))
	for _, r := range all {
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y *wire.LimitRule) int { return strings.Compare(x.Resource, y.Resource) })
	writeJSON(w, http.StatusOK, map[string]any{
		"revision": a.client.Revision(),
		"stale":    a.client.Stale(),
		"limits":   out,
	})
}

func (a *Agent) getLimit(w http.ResponseWriter, r *http.Request) {
	res := r.PathValue("resource")
	rule, ok := a.client.LimitRule(res)
	if !ok {
		writeProblem(w, r, http.StatusNotFound, "limit rule not found",
			fmt.Sprintf("resource: no limit rule is published for %q", res))
		return
	}
	writeJSON(w, http.StatusOK, rule)
}

func (a *Agent) readyz(w http.ResponseWriter, _ *http.Request) {
	live := a.client.Ready()
	rev := a.client.Revision()
	// Revision is non-zero once the disk snapshot or a live listing was applied.
	ready := live || rev > 0
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{
		"ready":    ready,
		"live":     live,
		"stale":    a.client.Stale(),
		"revision": rev,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// problem is an RFC 9457 problem document.
type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
}

func writeProblem(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problem{Type: "about:blank", Title: title, Status: status,
		Detail: detail, Instance: r.URL.RequestURI()})
}
