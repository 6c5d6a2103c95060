// Package server is the control-plane logic of the console: the domain model
// of switches and limit rules, their validation, the gorm store, the
// transactional change path (entity, audit event and outbox row in one
// transaction), the publisher and reconciler that keep etcd equal to the
// database, leader election, and API tokens.
//
// It knows nothing about HTTP: server/api and the web UI translate requests
// into calls on Service and map its typed errors to responses. It never
// imports the SDK core; the only shared contract is sdk/wire.
package server
