package embedetcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/switchyard-io/switchyard/internal/embedetcd"
	"github.com/switchyard-io/switchyard/internal/etcdtest"
)

// TestAutoCompaction: the embedded member compacts its history by itself,
// so a fleet's reports cannot grow it without bound.
func TestAutoCompaction(t *testing.T) {
	srv, err := embedetcd.Start(embedetcd.Config{
		Dir: t.TempDir(), ClientURL: "http://" + etcdtest.FreeAddr(t), PeerURL: "http://" + etcdtest.FreeAddr(t),
		CompactionRetention: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	first, err := cli.Put(ctx, "/report", "0")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 1; ; i++ {
		if _, err := cli.Put(ctx, "/report", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		_, err := cli.Get(ctx, "/report", clientv3.WithRev(first.Header.Revision))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the first revision was never compacted")
		}
		time.Sleep(100 * time.Millisecond) // a report interval, not synchronisation
	}
}
