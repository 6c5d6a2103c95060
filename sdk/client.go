package sdk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// ErrClosed is returned by WaitReady after Close.
var ErrClosed = errors.New("sdk: client closed")

// Client holds the live switch and limit-rule set of one app. It is safe
// for concurrent use. Create it with New and release it with Close.
type Client struct {
	cfg   Config
	log   *slog.Logger
	state statePtr
	env   map[string]bool // environment fallbacks by envName(switch)

	// prefixes are the six watched prefixes: switches, overrides and limits
	// of the app and of _global.
	prefixes [6]string

	mu        sync.Mutex // serializes writers: apply, Switch, OnChange
	names     map[string]uint32
	sigs      []*switchSignals    // by names index; states share it (see state.sigs)
	touched   map[uint32]struct{} // switches changed by live updates since the last ack
	listeners []*listener

	fallbacks    atomic.Uint64 // fallbacks served by Client.On
	decodeErrors atomic.Uint64 // published values that did not parse
	snapErrors   atomic.Uint64 // disk snapshots that could not be read or written
	watchErrors  atomic.Uint64 // failed lists and broken watches
	relists      atomic.Uint64 // re-lists forced by compaction
	sessionUp    atomic.Bool   // a list succeeded and the watch runs
	reachable    atomic.Bool   // the last registry heartbeat succeeded
	connUp       atomic.Bool   // the gRPC connection to etcd is ready (see watchConn)
	freshAt      atomic.Int64  // unix nanos when data was last confirmed current
	appliedAt    atomic.Int64  // unix nanos of the last applied live change or revision change

	ready     chan struct{}
	readyOnce sync.Once
	startedAt time.Time

	etcd *clientv3.Client
	// hasEtcd is set once etcd is set (at New, or later by connect).
	hasEtcd atomic.Bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	disk diskWriter

	metrics   *collector
	closeOnce sync.Once

	enforceOnce sync.Once
	enforce     atomic.Pointer[enforcement] // limit enforcement, created by the first Limiter call

	report *reporter // owned by the registry goroutine

	// clock times L4 warm-ups (warmup.go); tests replace it before the
	// first apply.
	clock limit.Clock
	// warmUntil is the clock reading at which the last L4 warm-up in
	// progress ends, 0 when none is: the one load a write pays.
	warmUntil atomic.Int64
	warmSeq   atomic.Uint64 // warm-up decisions taken (warmPass)
}

// ChangeKind says what a Change is about.
type ChangeKind uint8

// Kinds of changes.
const (
	SwitchChanged ChangeKind = iota + 1 // the effective value of a switch changed
	LimitChanged                        // the effective rule of a resource changed
)

// Change describes one applied change of a switch or limit rule.
type Change struct {
	Kind ChangeKind
	// Name is the switch name or the limit resource.
	Name string
	// Switch is the new effective switch, nil when it was deleted.
	Switch *wire.Switch
	// On is the new instance-level answer of the switch.
	On bool
	// Limit is the new effective limit rule, nil when it was deleted.
	Limit *wire.LimitRule
	// Revision is the etcd revision of the change (of the newest one when
	// several keys changed together, of the listing after a re-list).
	Revision int64
}

type listener struct{ fn func(Change) }

// New creates a client and returns without waiting for etcd: it loads the
// disk snapshot (if SnapshotDir is set), reads the environment fallbacks
// and connects in the background. ctx bounds only New itself; the client
// runs until Close.
func New(ctx context.Context, cfg Config) (*Client, error) { return newClient(ctx, cfg, nil) }

// newClient is New; tests pass wrap to interpose on the etcd client (its
// Watcher, say) before the background goroutines start.
func newClient(ctx context.Context, cfg Config, wrap func(*clientv3.Client)) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Client{
		cfg:       cfg,
		log:       cfg.Logger.With("component", "switchyard-sdk", "app", cfg.App),
		env:       readEnv(cfg.App, os.Environ()),
		names:     map[string]uint32{},
		touched:   map[uint32]struct{}{},
		ready:     make(chan struct{}),
		startedAt: time.Now(),
		clock:     limit.SystemClock,
	}
	c.reachable.Store(true)
	i := 0
	for _, kind := range []string{wire.KindSwitches, wire.KindOverrides, wire.KindLimits} {
		for _, app := range []string{cfg.App, wire.GlobalApp} {
			c.prefixes[i] = wire.AppPrefix(cfg.Namespace, kind, app)
			i++
		}
	}
	c.state.Store(&state{
		items:  map[string]*item{},
		index:  map[string]uint32{},
		limits: map[string]*wire.LimitRule{},
	})
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.report = newReporter(c, time.Now)
	c.disk.init(c)
	if cfg.SnapshotDir != "" {
		c.loadSnapshot()
	}
	if cfg.Registerer != nil {
		c.metrics = newCollector(c)
		if err := cfg.Registerer.Register(c.metrics); err != nil {
			c.cancel()
			return nil, fmt.Errorf("sdk: register metrics: %w", err)
		}
	}
	if len(cfg.Endpoints) == 0 {
		c.log.Info("no etcd endpoints: running offline from snapshot, environment and defaults")
		return c, nil
	}
	ecfg := clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		TLS:                  cfg.TLS,
		Logger:               zap.NewNop(),
		// gRPC's default reconnect backoff grows to 120 s; after an etcd
		// outage the SDK must be back within seconds.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: maxBackoff / 5},
			MinConnectTimeout: cfg.DialTimeout,
		})},
	}
	if err := cfg.Security.Apply(&ecfg); err != nil {
		c.cancel()
		if c.metrics != nil {
			cfg.Registerer.Unregister(c.metrics)
		}
		return nil, fmt.Errorf("sdk: etcd client: %w", err)
	}
	if ecfg.Username != "" {
		// With a user name, etcd's client authenticates inside New and
		// fails there when etcd is away: connect in the background instead.
		c.wg.Add(1)
		go c.connect(ecfg, wrap)
		return c, nil
	}
	cli, err := clientv3.New(ecfg)
	if err != nil {
		c.cancel()
		if c.metrics != nil {
			cfg.Registerer.Unregister(c.metrics)
		}
		return nil, fmt.Errorf("sdk: etcd client: %w", err)
	}
	c.start(cli, wrap)
	return c, nil
}

// start runs the background work on the connected etcd client cli.
func (c *Client) start(cli *clientv3.Client, wrap func(*clientv3.Client)) {
	if wrap != nil {
		wrap(cli)
	}
	c.etcd = cli
	c.hasEtcd.Store(true)
	c.wg.Add(3)
	go c.watchConn()
	go c.run()
	go c.registry()
}

// connect makes the etcd client of an authenticating SDK, retrying with
// backoff until etcd answers or the client closes; meanwhile the client
// serves its snapshot, environment and defaults.
func (c *Client) connect(ecfg clientv3.Config, wrap func(*clientv3.Client)) {
	defer c.wg.Done()
	ecfg.Context = c.ctx
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		cli, err := clientv3.New(ecfg)
		if err == nil {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.ctx.Err() != nil {
				cli.Close()
				return
			}
			c.start(cli, wrap)
			return
		}
		c.log.Warn("etcd: cannot connect and authenticate yet; serving the last known state", "err", err, "attempt", attempt)
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, maxBackoff)
	}
}

// Close stops watching, deregisters the instance, writes a final disk
// snapshot and releases resources. It is safe to call more than once.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.cancel() // under mu: background starts nothing from now on
		c.mu.Unlock()
		c.wg.Wait()
		if c.etcd != nil {
			c.etcd.Close()
		}
		c.disk.close()
		if c.metrics != nil {
			c.cfg.Registerer.Unregister(c.metrics)
		}
	})
	return nil
}

// background runs f on a goroutine that Close waits for. Once Close has
// begun it runs nothing and returns false.
func (c *Client) background(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// Ready reports whether live data from etcd has been applied at least once.
func (c *Client) Ready() bool {
	select {
	case <-c.ready:
		return true
	default:
		return false
	}
}

// WaitReady blocks until live data has been applied, ctx is done or the
// client is closed. A client without Endpoints never becomes ready.
func (c *Client) WaitReady(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
}

// Stale reports whether the answers may be out of date: no live data yet,
// or the connection to etcd is lost. The last known state keeps being
// served either way.
func (c *Client) Stale() bool { return !c.Ready() || !c.connected() }

// reported is the source to report for an entry of the current state:
// live data becomes SourceStale while the client is stale.
func (c *Client) reported(s Source) Source {
	if s == SourceLive && c.Stale() {
		return SourceStale
	}
	return s
}

// connected reports whether the watch runs over a ready connection and
// etcd answers the registry's lease keepalives. A closed or refused
// connection shows at once (watchConn); a silent one (a network partition
// that drops packets) shows when the keepalives go unanswered.
func (c *Client) connected() bool {
	return c.sessionUp.Load() && c.connUp.Load() && c.reachable.Load()
}

// Revision returns the etcd revision through which every change to the
// app's switches, overrides and limit rules has been applied (from the
// disk snapshot until live data arrives), 0 when there is none. It can
// trail the newest applied change by a progress round trip, never lead it.
func (c *Client) Revision() int64 { return c.state.Load().rev }

// InstanceID returns the instance id in use (Config.InstanceID or its default).
func (c *Client) InstanceID() string { return c.cfg.InstanceID }

// LimitRule returns the effective limit rule of a resource: the app's own
// rule, else a _global one. The rule is shared: do not modify it.
func (c *Client) LimitRule(resource string) (*wire.LimitRule, bool) {
	r, ok := c.state.Load().limits[resource]
	return r, ok
}

// LimitRules returns every effective limit rule by resource.
func (c *Client) LimitRules() map[string]*wire.LimitRule {
	return maps.Clone(c.state.Load().limits)
}

// OnChange registers fn to be called after every applied change of a
// switch or limit rule, on the client's watch goroutine, in order. fn must
// not block and must not call Close (which waits for that goroutine). The
// returned function unregisters it.
func (c *Client) OnChange(fn func(Change)) (cancel func()) {
	l := &listener{fn: fn}
	c.mu.Lock()
	c.listeners = append(append([]*listener(nil), c.listeners...), l)
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		out := make([]*listener, 0, len(c.listeners))
		for _, x := range c.listeners {
			if x != l {
				out = append(out, x)
			}
		}
		c.listeners = out
	}
}

func (c *Client) markReady() { c.readyOnce.Do(func() { close(c.ready) }) }

// indexLocked returns the stable index of a switch name, assigning one
// along with the name's signals.
func (c *Client) indexLocked(name string) uint32 {
	if i, ok := c.names[name]; ok {
		return i
	}
	i := uint32(len(c.names))
	c.names[name] = i
	c.sigs = append(c.sigs, newSwitchSignals(name))
	return i
}

// coverLocked republishes the state with entries and signals for every
// indexed name, so that a handle's index is always in range (Handle.On
// relies on it).
func (c *Client) coverLocked() {
	s := c.state.Load()
	if len(s.entries) >= len(c.names) {
		return
	}
	next := *s
	next.entries = make([]entry, len(c.names))
	copy(next.entries, s.entries)
	next.sigs = c.sigs
	c.state.Store(&next)
}

// takeTouched returns the switches changed by live updates since the last
// call, for the follow-up report after an ack.
func (c *Client) takeTouched() map[uint32]struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.touched) == 0 {
		return nil
	}
	t := c.touched
	c.touched = map[uint32]struct{}{}
	return t
}

// kvUpdate is one key from a list, a watch event or the disk snapshot.
type kvUpdate struct {
	key    string
	value  []byte
	modRev int64
	del    bool
}

// decodeItem parses a key and its published value. The key must belong to
// the client's namespace, app or _global, and a switch, override or limit;
// the value must agree with the key.
func decodeItem(ns, app, key string, value []byte, modRev int64) (*item, error) {
	pk, err := wire.ParseKey(ns, key)
	if err != nil {
		return nil, err
	}
	if pk.App != app && pk.App != wire.GlobalApp {
		return nil, fmt.Errorf("sdk: key %q belongs to another app", key)
	}
	it := &item{key: key, kind: pk.Kind, app: pk.App, name: pk.Name, modRev: modRev, value: value}
	switch pk.Kind {
	case wire.KindSwitches, wire.KindOverrides:
		sw, err := decodeSwitch(value)
		if err != nil {
			return nil, err
		}
		if sw.App != pk.App || sw.Name != pk.Name {
			return nil, fmt.Errorf("sdk: key %q holds switch %s/%s", key, sw.App, sw.Name)
		}
		it.sw = sw
	case wire.KindLimits:
		r, err := wire.DecodeLimitRule(value)
		if err != nil {
			return nil, err
		}
		if r.App != pk.App || r.Resource != pk.Name {
			return nil, fmt.Errorf("sdk: key %q holds limit %s/%s", key, r.App, r.Resource)
		}
		it.lim = r
	default:
		return nil, fmt.Errorf("sdk: key %q is not a switch, override or limit", key)
	}
	return it, nil
}

// apply folds updates into a new immutable state and publishes it in one
// atomic swap. With relist, keys absent from ups are deleted (ups is the
// complete listing at rev). A value that does not parse keeps the key's
// previous value and counts an error; nothing else is removed. rev is the
// revision through which everything is now applied; it becomes the
// state's revision unless that is already higher (a live re-list sets it
// outright).
func (c *Client) apply(ups []kvUpdate, relist bool, rev int64, source Source) {
	c.mu.Lock()
	prev := c.state.Load()
	var items map[string]*item
	if len(ups) > len(prev.items) {
		items = make(map[string]*item, len(ups))
		maps.Copy(items, prev.items)
	} else {
		items = maps.Clone(prev.items)
	}
	names := make(map[string]struct{}, min(len(ups), 1024))
	resources := map[string]struct{}{}
	mark := func(it *item) {
		if it.kind == wire.KindLimits {
			resources[it.name] = struct{}{}
		} else {
			names[it.name] = struct{}{}
		}
	}
	var listed map[string]struct{}
	if relist {
		listed = make(map[string]struct{}, len(ups))
	}
	persist := false
	changeRev := rev // the revision of this batch's newest data, for Change
	pre, preErr := c.predecode(prev.items, ups)
	for i, u := range ups {
		if relist {
			listed[u.key] = struct{}{}
		}
		changeRev = max(changeRev, u.modRev)
		old := items[u.key]
		if u.del {
			if old != nil {
				delete(items, u.key)
				mark(old)
				persist = persist || old.kind != wire.KindOverrides
			}
			continue
		}
		if old != nil && old.modRev == u.modRev && bytes.Equal(old.value, u.value) {
			continue
		}
		var it *item
		var err error
		if pre != nil && (pre[i] != nil || preErr[i] != nil) {
			it, err = pre[i], preErr[i]
		} else {
			it, err = decodeItem(c.cfg.Namespace, c.cfg.App, u.key, u.value, u.modRev)
		}
		if err != nil {
			c.decodeErrors.Add(1)
			c.log.Warn("ignoring unparsable value, keeping the previous one", "key", u.key, "mod_revision", u.modRev, "err", err)
			continue
		}
		items[u.key] = it
		mark(it)
		persist = persist || it.kind != wire.KindOverrides
	}
	if relist {
		for k, it := range items {
			if _, ok := listed[k]; !ok {
				delete(items, k)
				mark(it)
				persist = persist || it.kind != wire.KindOverrides
			}
		}
	}
	// The state's revision is rev, never an item's mod revision: a watch
	// event at R+1 may arrive before one at R on another prefix, and the
	// revision must not claim R is applied before it is (see session).
	nextRev := max(prev.rev, rev)
	if relist && source == SourceLive {
		// A live listing is the whole truth at its revision, also when etcd
		// went backwards (a cluster restored from a backup).
		nextRev = rev
	}
	next := &state{rev: nextRev, items: items, source: source, limits: prev.limits}
	if source == SourceLive || prev.dataAt.IsZero() {
		next.dataAt = time.Now()
	} else {
		next.dataAt = prev.dataAt
	}
	for n := range names {
		c.indexLocked(n)
	}
	next.index = prev.index
	if len(c.names) != len(prev.index) {
		next.index = maps.Clone(c.names)
	}
	next.entries = make([]entry, len(c.names))
	copy(next.entries, prev.entries)
	next.sigs = c.sigs
	full := prev.source != source
	// Rebuild the entries of changed names (all names when the source
	// changes), on all CPUs for large batches.
	var todo []string
	if full {
		todo = make([]string, 0, len(next.index))
		for n := range next.index {
			todo = append(todo, n)
		}
	} else {
		todo = make([]string, 0, len(names))
		for n := range names {
			todo = append(todo, n)
		}
	}
	notify := len(c.listeners) > 0
	now := c.clock.Nanotime()
	var warmEnd atomic.Int64 // the latest end of a warm-up this apply starts
	update := func(todo []string) (changes []Change) {
		match := selectorMatcher(c.cfg.Labels)
		for _, n := range todo {
			i := next.index[n]
			e := buildEntry(c.effective(items, n), source, c.cfg.InstanceID, match)
			old := next.entries[i]
			if end, ok := e.warmAfter(&old, now); ok {
				maxInt64(&warmEnd, end)
			}
			next.entries[i] = e
			if notify && (old.sw != e.sw || old.on != e.on) {
				changes = append(changes, Change{Kind: SwitchChanged, Name: n, Switch: e.sw, On: e.on, Revision: changeRev})
			}
		}
		return changes
	}
	var changes []Change
	if workers := runtime.GOMAXPROCS(0); len(todo) >= parallelDecodeMin && workers > 1 {
		parts := make([][]Change, workers)
		chunk := (len(todo) + workers - 1) / workers
		var wg sync.WaitGroup
		for w := range workers {
			lo, hi := min(w*chunk, len(todo)), min((w+1)*chunk, len(todo))
			wg.Add(1)
			go func() {
				defer wg.Done()
				parts[w] = update(todo[lo:hi])
			}()
		}
		wg.Wait()
		for _, p := range parts {
			changes = append(changes, p...)
		}
	} else {
		changes = update(todo)
	}
	if source == SourceLive {
		for _, n := range todo {
			c.touched[next.index[n]] = struct{}{}
		}
	}
	if len(resources) > 0 {
		next.limits = maps.Clone(prev.limits)
		for r := range resources {
			old := next.limits[r]
			lim := c.effectiveLimit(items, r)
			if lim == nil {
				delete(next.limits, r)
			} else {
				next.limits[r] = lim
			}
			if old != lim {
				changes = append(changes, Change{Kind: LimitChanged, Name: r, Limit: lim, Revision: changeRev})
			}
		}
	}
	c.state.Store(next)
	if end := warmEnd.Load(); end != 0 {
		maxInt64(&c.warmUntil, end)
	}
	listeners := c.listeners
	c.mu.Unlock()

	if source == SourceLive {
		now := time.Now().UnixNano()
		c.freshAt.Store(now)
		// Acks are debounced from here, not from the confirmation of the
		// revision (confirm), which follows within a progress round trip.
		if len(ups) > 0 || next.rev != prev.rev || prev.source != SourceLive {
			c.appliedAt.Store(now)
		}
		if persist || prev.source != SourceLive {
			c.disk.schedule()
		}
	}
	for _, ch := range changes {
		for _, l := range listeners {
			l.fn(ch)
		}
	}
}

// confirm publishes rev as the applied revision of the live state when
// the watch has shown that nothing up to rev is missing and no event came
// with it (see session). Items and entries are shared with the previous
// state, which is immutable.
func (c *Client) confirm(rev int64) {
	c.mu.Lock()
	prev := c.state.Load()
	if rev <= prev.rev || prev.source != SourceLive {
		c.mu.Unlock()
		return
	}
	next := *prev
	next.rev = rev
	c.state.Store(&next)
	c.mu.Unlock()
	c.freshAt.Store(time.Now().UnixNano())
}

// parallelDecodeMin is the batch size from which values are decoded on
// all CPUs (a cold start from a large snapshot, a re-list).
const parallelDecodeMin = 512

// predecode decodes the changed values of a large batch in parallel. It
// returns nil slices for small batches.
func (c *Client) predecode(old map[string]*item, ups []kvUpdate) ([]*item, []error) {
	if len(ups) < parallelDecodeMin {
		return nil, nil
	}
	pre := make([]*item, len(ups))
	errs := make([]error, len(ups))
	workers := runtime.GOMAXPROCS(0)
	chunk := (len(ups) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(ups); lo += chunk {
		hi := min(lo+chunk, len(ups))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				u := &ups[i]
				if u.del {
					continue
				}
				if o := old[u.key]; o != nil && o.modRev == u.modRev && bytes.Equal(o.value, u.value) {
					continue
				}
				pre[i], errs[i] = decodeItem(c.cfg.Namespace, c.cfg.App, u.key, u.value, u.modRev)
			}
		}()
	}
	wg.Wait()
	return pre, errs
}

// effective resolves a switch name: app override, app switch, global
// override, global switch.
func (c *Client) effective(items map[string]*item, name string) *wire.Switch {
	var buf [256]byte
	for _, p := range [...]string{c.prefixes[2], c.prefixes[0], c.prefixes[3], c.prefixes[1]} {
		b := append(append(buf[:0], p...), name...)
		if it := items[string(b)]; it != nil {
			return it.sw
		}
	}
	return nil
}

func (c *Client) effectiveLimit(items map[string]*item, resource string) *wire.LimitRule {
	ns := c.cfg.Namespace
	if it := items[wire.LimitKey(ns, c.cfg.App, resource)]; it != nil {
		return it.lim
	}
	if it := items[wire.LimitKey(ns, wire.GlobalApp, resource)]; it != nil {
		return it.lim
	}
	return nil
}
