// Package ofreptest proves the agent's OFREP API with OpenFeature's own
// JavaScript client: its test drives driver.mjs (@openfeature/server-sdk
// with @openfeature/ofrep-provider, versions pinned in package-lock.json)
// against a running console and agent. node_modules is installed by the
// test with `npm ci` and never committed. The package has no code.
package ofreptest
