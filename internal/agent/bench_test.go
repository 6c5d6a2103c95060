package agent

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// BenchmarkEvaluateOverHTTP: one switch evaluated for a request key over
// loopback HTTP with a keep-alive client, through the agent's JSON API (the
// baseline) and through OFREP's single-flag endpoint. The target
// is OFREP within 1.2× of the JSON API:
//
//	go test ./internal/agent -run '^$' -bench EvaluateOverHTTP -benchtime 2000x
func BenchmarkEvaluateOverHTTP(b *testing.B) {
	etcd := etcdtest.Start(b)
	cli := etcd.Client(b)
	b2, _ := json.Marshal(wire.Switch{App: app, Name: "recommend", Level: wire.L1, State: wire.StateOn,
		Rollout: wire.Rollout{Percent: 50, Stickiness: wire.StickyKey}, Fallback: json.RawMessage(`{"items":[]}`), Version: 3})
	if _, err := cli.Put(b.Context(), wire.SwitchKey(ns, app, "recommend"), string(b2)); err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.EtcdEndpoints, cfg.Namespace, cfg.App, cfg.InstanceID, cfg.SnapshotDir = []string{etcd.Endpoint}, ns, app, "host-1", ""
	cfg.OFREPRate = 0
	a, err := New(b.Context(), cfg, discard)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	if err := a.Client().WaitReady(b.Context()); err != nil {
		b.Fatal(err)
	}
	api, ofrep := httptest.NewServer(a.Handler()), httptest.NewServer(a.OFREPHandler())
	defer api.Close()
	defer ofrep.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}

	send := func(b *testing.B, req *http.Request) {
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
	jsonReq := func() *http.Request {
		r, _ := http.NewRequest(http.MethodGet, api.URL+"/v1/switches/recommend?key=tenant-42", nil)
		return r
	}
	body := []byte(`{"context":{"targetingKey":"tenant-42"}}`)
	ofrepReq := func() *http.Request {
		r, _ := http.NewRequest(http.MethodPost, ofrep.URL+"/ofrep/v1/evaluate/flags/recommend", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	b.Run("json-api", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			send(b, jsonReq())
		}
	})
	b.Run("ofrep", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			send(b, ofrepReq())
		}
	})
	// The agent's own share: the handlers alone, without the network.
	b.Run("handler-only/json-api", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.Handler().ServeHTTP(httptest.NewRecorder(), jsonReq())
		}
	})
	b.Run("handler-only/ofrep", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.OFREPHandler().ServeHTTP(httptest.NewRecorder(), ofrepReq())
		}
	})
	// On a shared machine loopback latency drifts between runs; alternating
	// the two requests puts both under the same load for the ratio.
	b.Run("alternating", func(b *testing.B) {
		var jsonNS, ofrepNS time.Duration
		timed := func(req *http.Request) time.Duration {
			t0 := time.Now()
			send(b, req)
			return time.Since(t0)
		}
		odd := false
		for b.Loop() {
			if odd = !odd; odd { // either goes first every other time
				jsonNS += timed(jsonReq())
				ofrepNS += timed(ofrepReq())
			} else {
				ofrepNS += timed(ofrepReq())
				jsonNS += timed(jsonReq())
			}
		}
		b.ReportMetric(float64(jsonNS.Nanoseconds())/float64(b.N), "json-ns/op")
		b.ReportMetric(float64(ofrepNS.Nanoseconds())/float64(b.N), "ofrep-ns/op")
		b.ReportMetric(float64(ofrepNS)/float64(jsonNS), "ofrep/json")
	})
}
