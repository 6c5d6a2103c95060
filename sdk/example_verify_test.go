package sdk_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchyard-io/switchyard/sdk"
)

// Quote is a price as the pricing service and its cache return it.
type Quote struct {
	SKU   string  `json:"sku"`
	Price float64 `json:"price"`
}

func livePrice(context.Context) (Quote, error)   { return Quote{"socks", 3}, nil }
func cachedPrice(context.Context) (Quote, error) { return Quote{"socks", 2.5}, nil }

// Verify keeps an L2 (stale) path honest while the switch is off: the
// caller always gets the live result; on a sampled call the cached path
// also runs, off the caller's path, and its shape is compared with the
// live one. (This client has no etcd, so the switch is unpublished and
// nothing is sampled.)
func ExampleVerify() {
	ctx := context.Background()
	client, err := sdk.New(ctx, sdk.Config{App: "checkout", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	prices := client.Switch("prices-from-cache") // L2
	price := func(ctx context.Context) (Quote, error) {
		if prices.On(ctx) {
			return cachedPrice(ctx)
		}
		return sdk.Verify(ctx, prices, livePrice, func(ctx context.Context) (Quote, error) {
			return cachedPrice(ctx) // prices.On(ctx) answers on in here
		})
	}
	q, err := price(ctx)
	fmt.Println(q, err)
	// Output: {socks 3} <nil>
}
