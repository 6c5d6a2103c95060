// Package sdk is the Switchyard client library a service embeds to read
// degradation switches and limit rules published by the console.
//
// A Client lists and watches its app's keys (and the reserved "_global"
// app's switches and limits) in etcd, keeps an immutable snapshot of them
// behind an atomic pointer, mirrors it to a disk snapshot, and registers the
// instance under a lease so the console can show convergence. It never
// blocks on etcd: New loads the disk snapshot and returns; live data
// arrives in the background.
//
//	c, err := sdk.New(ctx, sdk.Config{Endpoints: eps, App: "checkout", SnapshotDir: "/var/lib/switchyard"})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	reviews := c.Switch("reviews") // keep the handle
//	if reviews.On(ctx) { /* degraded path */ }
//
// The package example "Service" shows a whole service.
//
// # Value order
//
// When no live value exists for a switch the answer comes from, in order:
// the disk snapshot, the environment variable
// SWITCHYARD_SWITCH_<APP>_<NAME>=on|off (upper case, "." and "-" become
// "_"; read once, when New runs), the Default option given to
// Client.Switch, and finally off. Every answer from the last three counts
// in switchyard_sdk_fallbacks_served_total.
//
// # Precedence
//
// For a switch name the effective value is the first that exists of:
// overrides/<app>/<name>, switches/<app>/<name>, overrides/_global/<name>,
// switches/_global/<name>. So an app's own switch wins over an org-wide
// switch of the same name, and a drill's lease-bound override wins over the
// published switch while it exists. Limit rules: the app's own rule wins
// over a _global rule for the same resource. Overrides are never written to
// the disk snapshot: a drill must not survive a restart during an outage.
//
// # Rollout hash
//
// An "on" switch applies to a member of its rollout. Membership is
//
//	bucket = FNV-1a-64(app + "/" + name + "/" + key) mod 10000
//	member = selector matches Config.Labels && bucket < round(percent*100)
//
// where app and name are the switch's own (so a _global switch picks the
// same members in every app) and key is Config.InstanceID for stickiness
// "instance" or the request key from WithKey for stickiness "key". A
// request without a key under key stickiness falls back to the instance
// key. Because membership is a threshold on a fixed bucket, widening a
// rollout only adds members. The function is wire.Bucket (Bucket here),
// pinned by golden vectors in sdk/wire/rollout_test.go; changing it would
// reshuffle every rollout in the fleet.
//
// # Hot path
//
// Handle.On takes no lock and does not allocate. Its not-degraded answer
// for instance stickiness is inlined into the caller: an atomic load of the
// snapshot, a few field reads and a load of the switch's read flag (see
// Fleet signals), no write. Other answers cost a call; a degraded one also
// an atomic add. For instance stickiness the decision is precomputed
// whenever a new snapshot is built; every applied watch response builds
// one new immutable snapshot and swaps it in whole.
//
// # Staleness and the instance registry
//
// Stale reports true until live data arrived, while the watch is being
// re-established, while the gRPC connection to etcd is not ready (at once
// when etcd stops or the connection is cut), and while the instance
// lease's keepalives go unanswered (about LeaseTTL/2 + 1 s into a silent
// partition). The last known state keeps being served, and Handle.Source
// reports it as SourceStale ("stale") instead of SourceLive.
//
// The applied revision (Client.Revision, the registry's ack) is one
// through which every change of the watched keys is applied: the client
// runs one watch per prefix, and a newer event on one may be applied
// before an older one on another, so the revision only advances to what
// every watch has delivered, confirmed with an etcd progress notification
// (a progress round trip after the change). The instance key
// instances/<app>/<instance-id> lives on a lease of LeaseTTL (10 s) and is
// rewritten once the applied revision has been quiet for 250 ms plus a
// random part of up to 1.5 s (at the latest 3 s plus that part after the
// oldest change it acks); the registry polls for it, so applying a change
// wakes nothing else, flips in quick succession cost one ack, and the
// acks of a flip reaching many instances are spread out instead of
// competing with the flip's own fan-out. A lost lease is re-granted and the
// key written again. Close revokes the lease (waiting at most 1 s).
//
// # Fleet signals
//
// Per switch name the client counts, since it started, the checks
// answered on (Handle.On, Client.On, the middleware's checks), the L1
// fallback values Handle.Fallback served and, for requests the middleware
// served degraded, their latency in the buckets of wire.LatencyBuckets
// (one histogram per switch that was on for the request); it also notes
// that a switch was read, which the registry turns into a coarse last-read
// time. Per limit rule it reports the Limiter's allowed, rejected and
// shadow-rejected counts and, for an unkeyed breaker, its state. The
// counters outlive snapshot swaps and sit on cache lines of their own.
//
// The registry writes them as wire.Instance.Report on the instance key:
// with every ack, once more within 5 s of an ack when the counters of the
// switches it changed moved (so a drill sees its flip take effect), and
// otherwise at most once per Config.ReportInterval (default 10 s; each
// report is due the interval plus a random 0–20 % after the previous one,
// never sooner, which spreads a fleet's writes), only when something
// changed (see reporter.due). A report carries only the entries
// that changed since they were last reported — counters that moved, a last
// read that advanced by 5 minutes, or never reported — and omits switches
// never read; the whole value stays within wire.MaxReportBytes (16 KiB),
// changes of degraded counters first, the rest oldest reported first, and
// Report.Pending counts what waits for the next report.
//
// # Metrics
//
// With Config.Registerer set, the client exports (all with const labels
// namespace, app and instance): switchyard_sdk_switch_on{switch,level,source}
// (source as Handle.Source reports it),
// switchyard_sdk_applied_revision, switchyard_sdk_snapshot_age_seconds,
// switchyard_sdk_watch_connected, switchyard_sdk_stale,
// switchyard_sdk_update_errors_total{kind=decode|snapshot|watch} and
// switchyard_sdk_fallbacks_served_total. They are computed at scrape time.
// Several clients may share a registerer when their (namespace, app,
// instance) differ; a duplicate makes New fail, it never panics.
//
// # Enforcement
//
// Client.Limiter(resource) returns a handle that enforces the resource's
// published limit rule (token bucket, sliding window, concurrency, GCRA,
// adaptive, breaker, and the overload levers throttle and system, CoDel
// queueing, criticality reserves and warm-up; mode shadow or enforce;
// scope instance or cluster; key_by), rebuilt in place when the rule
// changes. Requests carry a criticality (WithCriticality, or the
// CriticalityHeader the guards read); Client.RoundTripper and
// grpcx.UnaryClientInterceptor enforce rules on outbound calls
// (client-side throttling) and pass the criticality on. Client.Middleware wraps
// a net/http handler: 429 with Retry-After for limits, 503 for an open
// breaker and, with an L4 switch on, for every write; 202 through the
// service's Enqueuer for writes under an L5 switch. sdk/ginx, sdk/grpcx and
// sdk/openfeature adapt the same guard to gin, gRPC and OpenFeature.
//
// # Boundaries
//
// This package imports only the standard library, the etcd v3 client, the
// Prometheus client, sdk/wire and sdk/limit. It must never import gin, gorm or the
// console's packages (server/, audit/, web/, cmd/); TestImportBoundaries
// enforces it. Two imports come with the etcd client's own API: zap, to
// switch the etcd client's logging off (the SDK logs through
// Config.Logger), and gRPC, to cap the reconnect backoff at 2 s and to
// follow the connection's state.
package sdk
