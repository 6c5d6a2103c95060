package sdk

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus in testdata/fuzz")

const fuzzNS, fuzzApp = "test", "checkout"

// FuzzDecodeSnapshot feeds arbitrary files to the snapshot decoder and the
// cold-start path: they must be rejected or loaded, never panic, and a
// loaded state must answer.
func FuzzDecodeSnapshot(f *testing.F) {
	for _, seed := range snapshotSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, ups, err := decodeSnapshot(data, fuzzNS, fuzzApp)
		if err != nil {
			return
		}
		if h.Namespace != fuzzNS || h.App != fuzzApp {
			t.Fatalf("accepted a foreign snapshot %s/%s", h.Namespace, h.App)
		}
		c, err := New(context.Background(), Config{Namespace: fuzzNS, App: fuzzApp, Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.apply(ups, false, h.Revision, SourceSnapshot)
		ctx := WithKey(context.Background(), "k")
		for n := range c.state.Load().index {
			h := c.Switch(n)
			h.On(ctx)
			h.Level()
			h.MaxStaleness()
			var v any
			h.Fallback(&v)
		}
	})
}

// FuzzDecodeSwitchValue feeds arbitrary published values for one switch
// key: a value is either rejected (and counted) or yields an entry whose
// answers never panic and respect the rollout bounds.
func FuzzDecodeSwitchValue(f *testing.F) {
	for _, seed := range switchSeeds() {
		f.Add(seed)
	}
	key := wire.SwitchKey(fuzzNS, fuzzApp, "x")
	f.Fuzz(func(t *testing.T, value []byte) {
		// The fast path must agree with wire.DecodeSwitch.
		fast, ferr := decodeSwitch(value)
		slow, serr := wire.DecodeSwitch(value)
		if (ferr == nil) != (serr == nil) || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast path disagrees: %+v, %v vs %+v, %v", fast, ferr, slow, serr)
		}
		it, err := decodeItem(fuzzNS, fuzzApp, key, value, 1)
		if err != nil {
			return
		}
		if it.sw == nil || it.sw.Name != "x" || it.sw.App != fuzzApp {
			t.Fatalf("decoded %+v for key %s", it.sw, key)
		}
		e := buildEntry(it.sw, SourceLive, "inst-1", selectorMatcher(map[string]string{"zone": "a"}))
		if e.basis > Buckets {
			t.Fatalf("basis %d out of range", e.basis)
		}
		if e.on && it.sw.State != wire.StateOn {
			t.Fatal("on although state is not on")
		}
		e.keyOn(WithKey(context.Background(), "tenant"))
		e.keyOn(context.Background())
	})
}

func switchSeeds() [][]byte {
	full := `{"app":"checkout","name":"x","level":"L1","state":"on","rollout":{"percent":12.5,"stickiness":"key","selector":"zone=a"},"fallback":{"items":[]},"max_staleness":"30s","version":3,"expires_at":"2026-12-01T00:00:00Z"}`
	return [][]byte{
		[]byte(full),
		[]byte(`{"app":"checkout","name":"x","level":"L3","state":"off","rollout":{"percent":0},"version":1}`),
		[]byte(`{"app":"checkout","name":"x","level":"L9","state":"on"}`),
		[]byte(`{"app":"checkout","name":"x","level":"L2","state":"on","rollout":{"percent":100.001}}`),
		[]byte(`{"app":"other","name":"x","level":"L2","state":"on","rollout":{"percent":1}}`),
		[]byte(`{"app":"checkout","name":"x","level":"L2","state":"on","max_staleness":5}`),
		[]byte(`{"app":"checkout","name":"x"`),
		[]byte(`null`),
		[]byte(``),
		[]byte(`{"app":"checkout","name":"x","level":"L4","state":"off","rollout":{"percent":100},"warm_up":"2m","version":2}`),
		[]byte(`{"app":"checkout","name":"x","level":"L4","state":"off","rollout":{"percent":100},"warm_up":"-1s","version":2}`),
	}
}

func snapshotSeeds(tb testing.TB) [][]byte {
	dir, err := os.MkdirTemp("", "sdk-fuzz-seed")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sw := mkSwitch(fuzzApp, "recommend", wire.StateOn, 5)
	g := mkSwitch(wire.GlobalApp, "maintenance", wire.StateOff, 100)
	writeSnapshot(tb, dir, fuzzNS, fuzzApp, 42, sw, g)
	good, err := os.ReadFile(SnapshotPath(dir, fuzzNS, fuzzApp))
	if err != nil {
		tb.Fatal(err)
	}
	// The checked-in corpus pins written_at, so regenerate it only on request.
	good = pinWrittenAt(tb, good)
	writeSnapshot(tb, dir, fuzzNS, "payments", 42, mkSwitch("payments", "recommend", wire.StateOn, 5))
	foreign, _ := os.ReadFile(SnapshotPath(dir, fuzzNS, "payments"))
	return [][]byte{good, pinWrittenAt(tb, foreign), good[:len(good)/2], []byte(snapshotMagic), {}}
}

// pinWrittenAt rewrites a snapshot's written_at to a fixed time.
func pinWrittenAt(tb testing.TB, data []byte) []byte {
	h, ups, err := decodeSnapshot(data, fuzzNS, fuzzApp)
	if err != nil {
		return data // foreign: keep as is
	}
	st := &state{rev: h.Revision, items: map[string]*item{}}
	for _, u := range ups {
		it, err := decodeItem(fuzzNS, fuzzApp, u.key, u.value, u.modRev)
		if err != nil {
			tb.Fatal(err)
		}
		st.items[u.key] = it
	}
	out, err := encodeSnapshot(fuzzNS, fuzzApp, st, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestFuzzCorpus writes the seed corpus with -update-corpus and otherwise
// checks it is present.
func TestFuzzCorpus(t *testing.T) {
	sets := map[string][][]byte{
		"FuzzDecodeSnapshot":    snapshotSeeds(t),
		"FuzzDecodeSwitchValue": switchSeeds(),
	}
	for name, seeds := range sets {
		dir := filepath.Join("testdata", "fuzz", name)
		if *updateCorpus {
			os.MkdirAll(dir, 0o755)
			for i, s := range seeds {
				content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) < len(seeds) {
			t.Errorf("%s: seed corpus missing (%v); run go test ./sdk -run TestFuzzCorpus -update-corpus", dir, err)
		}
	}
}
