package sdk

import "github.com/switchyard-io/switchyard/sdk/wire"

// Buckets is the number of rollout buckets: a percent with two decimals
// is a threshold in [0, Buckets].
const Buckets = wire.Buckets

// Bucket returns the rollout bucket in [0, Buckets) of key for the switch
// app/name: FNV-1a 64 over app + "/" + name + "/" + key, modulo 10000.
// It is part of the protocol (wire.Bucket, pinned by golden vectors in
// sdk/wire): the same inputs give the same bucket in every process and
// every SDK version.
func Bucket(app, name, key string) int { return wire.Bucket(app, name, key) }
