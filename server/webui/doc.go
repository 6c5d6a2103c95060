// Package webui is the console's browser interface: server-rendered pages
// (html/template from package web) for the overview of what is degraded,
// switches, limit rules, instances, the audit log and administration.
//
// People sign in with a username and password; sessions live in the
// database and are bound to a CSRF token that every state-changing request
// must carry. Every change goes through server.Service, which enforces roles
// and writes the audit log, so this package never decides on its own who may
// change what. Live updates are server-sent events driven by an etcd watch
// on the namespace, backed by polling the audit log's head.
//
// The package keeps its own sessions table; for everything else it goes
// through server.Service and package audit, never to the tables directly.
package webui
