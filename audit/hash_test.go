package audit

import (
	"testing"
	"time"
)

// TestHashGolden pins the hash encoding: an event without a cause hashes
// exactly as events did before causes existed (the vector was computed by
// that version), so old chains still verify; a cause changes the hash, so
// it cannot be edited unnoticed.
func TestHashGolden(t *testing.T) {
	e := Event{
		ID: 7, At: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), Actor: "token:ops", ActorKind: ActorToken,
		Action: SwitchOn, Target: "switch/checkout/reco", Before: `{"state":"off"}`, After: `{"state":"on"}`,
		Reason: "incident", RequestID: "r1", RemoteAddr: "10.0.0.1", PrevHash: GenesisHash,
	}
	const preCause = "094253fbae42c0456ce5ec084c81bb73eb530f70656c7fee8f77a3a25c780c6f"
	if got := e.computeHash(); got != preCause {
		t.Fatalf("hash of an event without a cause changed: %s, want %s", got, preCause)
	}
	e.Cause = "trigger/checkout/cpu-high"
	withCause := e.computeHash()
	if withCause == preCause {
		t.Fatal("the cause is not covered by the hash")
	}
	e.Cause = "trigger/checkout/cpu-low"
	if e.computeHash() == withCause {
		t.Fatal("a different cause hashes the same")
	}
}
