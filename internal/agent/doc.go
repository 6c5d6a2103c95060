// Package agent is the per-host Switchyard sidecar: it runs one SDK client
// for an app (with its disk snapshot and instance registration) and serves
// the client's current answers to non-Go processes over a small local
// JSON HTTP API.
//
//	GET /v1/switches                  every published switch and its answer for this instance
//	GET /v1/switches/{name}?key=K     one switch; key is the request key for "key" stickiness
//	GET /v1/limits                    every effective limit rule
//	GET /v1/limits/{resource}         one rule; the resource is path-escaped ("POST%20%2Forders")
//	GET /healthz                      the process is up
//	GET /readyz                       503 until live or snapshot data is loaded
//	GET /metrics                      the SDK's Prometheus metrics
//
// Answers are exactly the SDK's: a switch that was never published answers
// 200 with "on": false and source "default" (or "env" when
// SWITCHYARD_SWITCH_<APP>_<NAME> is set), never 404, so a caller needs no
// special case for a switch the console has not created yet. Errors are
// RFC 9457 application/problem+json documents.
//
// On a second listener (--ofrep-listen, default 127.0.0.1:8016) it speaks
// the OpenFeature Remote Evaluation Protocol (ofrep.go), so services in any
// language read switches with their ecosystem's OFREP provider:
//
//	POST /ofrep/v1/evaluate/flags/{key}   one flag; {"context":{"targetingKey":K}}
//	POST /ofrep/v1/evaluate/flags         every flag for one context, with an ETag
//
// Every answer, on either API, counts in the agent's fleet signals: the
// agent is an instance of its app whose reads are its callers' reads.
//
// The JSON API has no authentication and must stay on loopback (the
// default); the OFREP API can require a bearer token (--ofrep-token-file).
// The package must not import the console (server/, audit/, web/): the
// agent is a client of etcd like any service, nothing more.
package agent
