package sdk_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// A client without endpoints answers from the disk snapshot, the
// environment and the defaults the code passes: the order a service sees
// when etcd has never been reachable.
func Example() {
	os.Setenv(sdk.EnvVar("checkout", "recommend"), "on")
	defer os.Unsetenv(sdk.EnvVar("checkout", "recommend"))

	ctx := context.Background()
	client, err := sdk.New(ctx, sdk.Config{
		App:    "checkout",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Endpoints: []string{"http://etcd:2379"}, SnapshotDir: "/var/lib/switchyard",
	})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	recommend := client.Switch("recommend")                // environment: on
	reviews := client.Switch("reviews", sdk.Default(true)) // code default: on
	search := client.Switch("search")                      // nothing: off
	fmt.Println(recommend.On(ctx), recommend.Source())
	fmt.Println(reviews.On(ctx), reviews.Source())
	fmt.Println(search.On(ctx), search.Source())
	fmt.Println("stale:", client.Stale())
	// Output:
	// true env
	// true default
	// false none
	// stale: true
}

// Bucket is the stable rollout hash: a key is in a rollout of p percent
// when its bucket is below p*100, so widening only adds members.
func ExampleBucket() {
	b := sdk.Bucket("checkout", "recommend", "tenant-42")
	fmt.Println(b)
	fmt.Println("in 5%:", b < 500, "in 99%:", b < 9900)
	// Output:
	// 9714
	// in 5%: false in 99%: true
}

// Business code marks a request as degraded once, so code further down can
// take the fast path without checking switches again.
func ExampleWithDegraded() {
	ctx := sdk.WithDegraded(context.Background(), wire.L1)
	if l := sdk.DegradedLevel(ctx); l != "" {
		fmt.Println("degraded:", l, l.Label())
	}
	// Output: degraded: L1 fallback
}

// Switches with stickiness "key" hash the request key carried by the
// context, so a tenant sees the same answer on every instance.
func ExampleWithKey() {
	ctx := sdk.WithKey(context.Background(), "tenant-42")
	key, _ := sdk.KeyFrom(ctx)
	fmt.Println(key)
	// Output: tenant-42
}

// A handle decodes an L1 switch's fallback payload; without a published
// value there is none.
func ExampleHandle_Fallback() {
	client, _ := sdk.New(context.Background(), sdk.Config{App: "checkout", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer client.Close()
	var items []string
	err := client.Switch("recommend").Fallback(&items)
	fmt.Println(err == sdk.ErrNoFallback)
	// Output: true
}

// OnChange lets code react to applied changes, including limit rules for
// the enforcement package.
func ExampleClient_OnChange() {
	client, _ := sdk.New(context.Background(), sdk.Config{App: "checkout", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer client.Close()
	stop := client.OnChange(func(ch sdk.Change) {
		switch ch.Kind {
		case sdk.SwitchChanged:
			fmt.Println("switch", ch.Name, "on:", ch.On)
		case sdk.LimitChanged:
			fmt.Println("limit", ch.Name, ch.Limit != nil)
		}
	})
	defer stop()
	_, ok := client.LimitRule("POST /orders")
	fmt.Println("rule known:", ok)
	// Output: rule known: false
}
