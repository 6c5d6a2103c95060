package grpcx

import (
	"cmp"
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchyard-io/switchyard/sdk"
)

// ClientOptions configure UnaryClientInterceptor.
type ClientOptions struct {
	// Resource names the limit rule guarding a call; typically one
	// resource per backend (a throttle rule "payments-api"). Default: the
	// full method name.
	Resource func(fullMethod string) string
	// IsFailure reports whether a call's error means the backend refused
	// or failed it. Default IsServerFault.
	IsFailure func(error) bool
	// CriticalityKey names the outgoing metadata key carrying the caller's
	// criticality. Default sdk.CriticalityHeader ("x-criticality"); "-"
	// sends none.
	CriticalityKey string
}

// UnaryClientInterceptor guards outbound unary calls with the limit rule
// of each call's resource, usually a throttle rule (client-side adaptive
// throttling):
//
//   - a call the rule refuses is not sent: it fails with Unavailable,
//     message "switchyard: <reason>" (throttled for a throttle rule);
//   - the caller's criticality (sdk.WithCriticality, or what an inbound
//     guard read) travels in the outgoing metadata under
//     sdk.CriticalityHeader unless the caller set it;
//   - a call failing with a server fault (IsFailure) counts as refused by
//     the backend, every other outcome as accepted.
func UnaryClientInterceptor(c *sdk.Client, opts ClientOptions) grpc.UnaryClientInterceptor {
	if opts.Resource == nil {
		opts.Resource = func(m string) string { return m }
	}
	if opts.IsFailure == nil {
		opts.IsFailure = IsServerFault
	}
	key := strings.ToLower(cmp.Or(opts.CriticalityKey, sdk.CriticalityHeader))
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		if cr, ok := sdk.CriticalityFrom(ctx); ok && key != "-" {
			if md, _ := metadata.FromOutgoingContext(ctx); len(md.Get(key)) == 0 {
				ctx = metadata.AppendToOutgoingContext(ctx, key, cr.String())
			}
		}
		p, err := c.Limiter(opts.Resource(method)).Acquire(ctx)
		if err != nil {
			var re *sdk.RejectError
			if errors.As(err, &re) {
				return status.Error(codes.Unavailable, "switchyard: "+re.Decision.Reason.String())
			}
			return status.FromContextError(err).Err()
		}
		err = invoker(ctx, method, req, reply, cc, callOpts...)
		p.Finish(!opts.IsFailure(err))
		return err
	}
}
