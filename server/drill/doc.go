// Package drill runs scheduled drills of degradation switches: a drill
// turns a switch on for a small slice of an app's instances for a short
// time and proves four things — it takes effect (the slice applied it and
// its degraded counters rose within 5 s), the fallback is correct (HTTP
// probes keep their status and required JSON fields), the degraded path is
// fast (p99 within max_p99), and it recovers (after the revert the slice
// reports it off, its counters stop and the probes answer as before).
//
// A run never touches the stored switch: it writes a lease-bound
// overrides/<app>/<name> key, which the SDK prefers while it exists. The
// leader keeps the lease alive and deletes the key to end the run; if the
// leader dies, etcd deletes it within the lease TTL, so a drill can never
// leave a switch on. A new leader records such a run as interrupted.
//
// The job's files follow its concerns: schedule.go fires the schedules
// (time zones and daylight saving, missed and refused runs), lease.go
// keeps the overrides' leases, rounds.go runs the probe rounds off the
// job's step, job.go moves each run through its phases (progress.go holds
// the state machine and the verdicts).
//
// The package owns the drills and drill_runs tables. It changes nothing
// but its own rows, the override keys and, through the audited change path
// of package server, the audit log, findings and notifications.
package drill
