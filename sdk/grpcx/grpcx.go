// Package grpcx adapts the Switchyard SDK's request guard to gRPC servers:
// unary and stream interceptors that enforce the limit rule of each method
// and the app's L4/L5 switches, judging each call by the criticality in its
// metadata; and a unary client interceptor for outbound calls (client-side
// throttling, criticality passed on).
//
// Rejections are gRPC statuses: a rate or concurrency rule gives
// ResourceExhausted; an open breaker, an L4 (read_only) switch on a write, or
// an L5 (queue_writes) switch on a write (gRPC writes cannot be queued by the
// SDK, so they fail explicitly) give Unavailable. The status message is
// "switchyard: <reason>" with reason from the SDK's fixed vocabulary, and
// the trailer carries "switchyard-reason" and, when known, "retry-after" in
// whole seconds.
//
// It lives outside package sdk so that the core keeps its small
// dependency set.
package grpcx

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchyard-io/switchyard/sdk"
)

// Options configure the interceptors. The zero value enforces limit rules
// by full method name and acts on no switch.
type Options struct {
	// Switches act by their published level (see sdk.Guard).
	Switches []*sdk.Handle
	// Resource names the resource of a method. Default: the full method
	// name ("/shop.v1.Orders/Create").
	Resource func(fullMethod string) string
	// IsWrite reports whether a method changes state, for L4/L5. Default
	// IsWriteMethod.
	IsWrite func(fullMethod string) bool
	// IsFailure classifies a handler error for breaker and adaptive rules.
	// Default IsServerFault.
	IsFailure func(error) bool
	// CriticalityKey names the incoming metadata key carrying a call's
	// criticality. Default sdk.CriticalityHeader ("x-criticality"); "-"
	// reads none.
	CriticalityKey string
}

func (o *Options) defaults() {
	if o.Resource == nil {
		o.Resource = func(m string) string { return m }
	}
	if o.IsWrite == nil {
		o.IsWrite = IsWriteMethod
	}
	if o.IsFailure == nil {
		o.IsFailure = IsServerFault
	}
}

// readVerbs are the method-name verbs IsWriteMethod takes for reads.
var readVerbs = []string{"Get", "List", "Read", "Watch", "Search", "Query", "Find", "Describe", "Check", "Lookup", "Count", "Fetch", "Exists", "Ping", "BatchGet"}

// IsWriteMethod is the default write classifier. It fails closed, since a
// write taken for a read would succeed under an L4 switch: a method is a
// read only when its name (after the last "/") starts with one of the verbs
// Get, List, Read, Watch, Search, Query, Find, Describe, Check, Lookup,
// Count, Fetch, Exists, Ping or BatchGet, followed by the end of the name or
// an upper-case letter or digit ("GetOrder", not "Getaway"), or when it
// belongs to a service of gRPC's own "grpc." packages (health, reflection).
// Every other method is a write; pass Options.IsWrite to classify them
// exactly.
func IsWriteMethod(fullMethod string) bool {
	if strings.HasPrefix(fullMethod, "/grpc.") {
		return false
	}
	name := fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
	for _, v := range readVerbs {
		if rest, ok := strings.CutPrefix(name, v); ok && (rest == "" || rest[0] >= 'A' && rest[0] <= 'Z' || rest[0] >= '0' && rest[0] <= '9') {
			return false
		}
	}
	return true
}

// IsServerFault is the default failure classifier: errors whose code says
// the server or a dependency failed (Unknown, DeadlineExceeded, Internal,
// Unavailable, DataLoss, ResourceExhausted) count; client errors
// (InvalidArgument, NotFound, PermissionDenied, …) count as success.
func IsServerFault(err error) bool {
	if err == nil {
		return false
	}
	switch status.Code(err) {
	case codes.Unknown, codes.DeadlineExceeded, codes.Internal, codes.Unavailable, codes.DataLoss, codes.ResourceExhausted:
		return true
	}
	return false
}

// md reads key_by header keys from incoming metadata.
type md metadata.MD

func (m md) Get(name string) string {
	if v := metadata.MD(m).Get(name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// enter runs the guard; a non-nil error is the rejection to return.
func enter(ctx context.Context, g *sdk.Guard, o *Options, method string, setTrailer func(metadata.MD)) (context.Context, sdk.Entry, error) {
	in, _ := metadata.FromIncomingContext(ctx)
	ctx, en := g.Enter(ctx, o.Resource(method), md(in), o.IsWrite(method))
	var reason string
	code := codes.Unavailable
	switch en.Verdict {
	case sdk.Reject:
		reason = en.Reason
		if reason == sdk.ReasonRateLimited || reason == sdk.ReasonConcurrencyLimited {
			code = codes.ResourceExhausted
		}
	case sdk.Queue:
		// The SDK cannot queue a gRPC write: it is refused, and counted so.
		en.Verdict, en.Reason = sdk.Reject, sdk.ReasonQueueUnavailable
		reason = en.Reason
	default:
		if err := en.Delay(ctx); err != nil {
			return ctx, en, status.FromContextError(err).Err()
		}
		return ctx, en, nil
	}
	tr := metadata.Pairs("switchyard-reason", reason)
	if en.RetryAfter > 0 || code == codes.ResourceExhausted {
		tr.Set("retry-after", strconv.Itoa(sdk.RetryAfterSeconds(en.RetryAfter)))
	}
	setTrailer(tr)
	en.Exit(true)
	return ctx, en, status.Error(code, "switchyard: "+reason)
}

// guard returns the guard of the interceptors.
func (o *Options) guard(c *sdk.Client) *sdk.Guard {
	g := c.Guard(o.Switches...)
	switch o.CriticalityKey {
	case "":
	case "-":
		g = g.WithCriticalityHeader("")
	default:
		g = g.WithCriticalityHeader(o.CriticalityKey)
	}
	return g
}

// UnaryServerInterceptor guards unary calls.
func UnaryServerInterceptor(c *sdk.Client, opts Options) grpc.UnaryServerInterceptor {
	opts.defaults()
	g := opts.guard(c)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (_ any, err error) {
		ctx, en, err := enter(ctx, g, &opts, info.FullMethod, func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) })
		if err != nil {
			return nil, err
		}
		done := false
		defer func() {
			if !done {
				en.Exit(false)
			}
		}()
		resp, err := handler(ctx, req)
		done = true
		en.Exit(!opts.IsFailure(err))
		return resp, err
	}
}

// StreamServerInterceptor guards streaming calls; the stream counts as
// one request for its whole life.
func StreamServerInterceptor(c *sdk.Client, opts Options) grpc.StreamServerInterceptor {
	opts.defaults()
	g := opts.guard(c)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, en, err := enter(ss.Context(), g, &opts, info.FullMethod, ss.SetTrailer)
		if err != nil {
			return err
		}
		if ctx != ss.Context() {
			ss = &stream{ServerStream: ss, ctx: ctx}
		}
		done := false
		defer func() {
			if !done {
				en.Exit(false)
			}
		}()
		err = handler(srv, ss)
		done = true
		en.Exit(!opts.IsFailure(err))
		return err
	}
}

// stream carries the guarded context (degraded level) to the handler.
type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }
