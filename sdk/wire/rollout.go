package wire

// Buckets is the number of rollout buckets: a percent with two decimals is
// a threshold in [0, Buckets].
const Buckets = 10000

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// Bucket returns the rollout bucket in [0, Buckets) of key for the switch
// app/name: FNV-1a 64 over app + "/" + name + "/" + key, modulo 10000. It
// is part of the protocol: the same inputs give the same bucket in every
// process and every version, so 5 % today is the same 5 % tomorrow and
// widening a rollout only adds members.
func Bucket(app, name, key string) int {
	return int(FNV(Seed(app, name), key) % Buckets)
}

// Seed is the FNV-1a 64 state after hashing app + "/" + name + "/"; FNV
// continues it over a key.
func Seed(app, name string) uint64 {
	h := FNV(fnvOffset64, app)
	h = (h ^ '/') * fnvPrime64
	h = FNV(h, name)
	return (h ^ '/') * fnvPrime64
}

// FNV continues the FNV-1a 64 state h over s.
func FNV(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

// Includes reports whether an instance with this id and labels is in the
// switch's rollout: the switch is on, its selector matches the labels
// and, for instance stickiness, the instance's bucket is below the
// percent. With key stickiness, or an include list, every matching
// instance takes part (the request key decides); the answer is true for it.
func (s *Switch) Includes(instanceID string, labels map[string]string) bool {
	if s.State != StateOn {
		return false
	}
	if s.Rollout.Selector != "" {
		sel, err := ParseSelector(s.Rollout.Selector)
		if err != nil || !sel.Matches(labels) {
			return false
		}
	}
	if s.Rollout.Stickiness == StickyKey || len(s.Rollout.Include) > 0 {
		return true
	}
	return Bucket(s.App, s.Name, instanceID) < s.Rollout.Basis()
}
