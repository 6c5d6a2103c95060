// Package webui is the console's browser interface: server-rendered pages
// (html/template from package web) for the overview of what is degraded,
// switches, limit rules, instances, the audit log and administration.
//
// People sign in with a username and password; sessions live in the
// database and are bound to a CSRF token that every state-changing request
// must carry. Every change goes through server.Service, which enforces roles
// and writes the audit log, so this package never decides on its own who may
// change what. Live updates are server-sent events driven by an etcd watch
// on the namespace.
//
// The package must not talk to the database for domain data except through
// server.Service and package audit.
package webui
