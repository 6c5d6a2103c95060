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
//	recommend := c.Switch("recommend")
//	if recommend.On(ctx) { /* degraded path */ }
//
// # Value order
//
// When no live value exists for a switch the answer comes from, in order:
// the disk snapshot, the environment variable
// SWITCHYARD_SWITCH_<APP>_<NAME>=on|off (upper case, "." and "-" become
// "_"), the Default option given to Client.Switch, and finally off.
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
// rollout only adds members. The function is pinned by golden vectors in
// rollout_test.go; changing it would reshuffle every rollout in the fleet.
//
// # Hot path
//
// Handle.On is one atomic load plus a few field reads: no lock and no
// allocation. For instance stickiness the decision is precomputed whenever
// a new snapshot is built.
//
// # Boundaries
//
// This package imports only the standard library, the etcd v3 client, the
// Prometheus client and sdk/wire. It must never import gin, gorm or the
// console's packages (server/, audit/, web/, cmd/); deps_test.go enforces
// it. Two imports come with the etcd client's own API: zap, to switch the
// etcd client's logging off (the SDK logs through Config.Logger), and
// gRPC, to cap the reconnect backoff at 2 s.
package sdk
