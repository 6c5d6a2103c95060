package sdk

// Buckets is the number of rollout buckets: a percent with two decimals
// is a threshold in [0, Buckets].
const Buckets = 10000

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// Bucket returns the rollout bucket in [0, Buckets) of key for the switch
// app/name: FNV-1a 64 over app + "/" + name + "/" + key, modulo 10000.
// It is part of the protocol: the same inputs give the same bucket in every
// process and every SDK version.
func Bucket(app, name, key string) int {
	return int(fnvString(seedFor(app, name), key) % Buckets)
}

// seedFor is the FNV-1a state after hashing app + "/" + name + "/".
func seedFor(app, name string) uint64 {
	h := fnvString(fnvOffset64, app)
	h = (h ^ '/') * fnvPrime64
	h = fnvString(h, name)
	return (h ^ '/') * fnvPrime64
}

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}
