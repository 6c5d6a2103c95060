// Package openfeature is an OpenFeature provider (github.com/open-feature/go-sdk)
// backed by a Switchyard SDK client, for services that evaluate flags
// through the vendor-neutral API.
//
// A switch is a flag of the same name:
//
//   - as a boolean flag its value is whether the switch is on for the
//     subject (Handle.On); the evaluation context's targeting key is the
//     request key of rollouts with stickiness "key" (sdk.WithKey);
//   - as a string flag its value is the switch's level, "L1" … "L5"
//     (Handle.Level), whatever its state.
//
// Reasons: STATIC for an answer that does not depend on the subject (an
// "on" switch at 100 % without a selector, or an environment fallback),
// TARGETING_MATCH for a subject inside a partial rollout, DEFAULT for an
// "off" switch or a subject outside the rollout, ERROR with FLAG_NOT_FOUND
// when nothing was ever published for the name (the caller's default is
// returned), and ERROR with TYPE_MISMATCH for float, int and object
// evaluations. Flag metadata carries level, state, source and version.
// Switch changes are emitted as PROVIDER_CONFIGURATION_CHANGED events.
//
// It lives outside package sdk so the core does not link OpenFeature.
package openfeature

import (
	"context"
	"sync"

	of "github.com/open-feature/go-sdk/openfeature"

	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Name is the provider name in Metadata.
const Name = "switchyard"

// Provider serves switches of one sdk.Client as OpenFeature flags.
type Provider struct {
	c       *sdk.Client
	handles sync.Map // flag -> *sdk.Handle
	events  chan of.Event

	mu     sync.Mutex
	cancel func()
}

var (
	_ of.FeatureProvider = (*Provider)(nil)
	_ of.StateHandler    = (*Provider)(nil)
	_ of.EventHandler    = (*Provider)(nil)
)

// NewProvider returns a provider over c. The client stays the caller's:
// shutting the provider down does not close it.
func NewProvider(c *sdk.Client) *Provider {
	return &Provider{c: c, events: make(chan of.Event, 64)}
}

// Metadata implements of.FeatureProvider.
func (p *Provider) Metadata() of.Metadata { return of.Metadata{Name: Name} }

// Hooks implements of.FeatureProvider; the provider has none.
func (p *Provider) Hooks() []of.Hook { return nil }

// Init implements of.StateHandler: it subscribes to switch changes. The
// client answers from its disk snapshot and fallbacks until etcd data
// arrives, so the provider is ready at once.
func (p *Provider) Init(of.EvaluationContext) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel == nil {
		p.cancel = p.c.OnChange(func(ch sdk.Change) {
			if ch.Kind != sdk.SwitchChanged {
				return
			}
			select { // OnChange must not block: drop when nobody reads
			case p.events <- of.Event{ProviderName: Name, EventType: of.ProviderConfigChange,
				ProviderEventDetails: of.ProviderEventDetails{Message: "switch changed", FlagChanges: []string{ch.Name}}}:
			default:
			}
		})
	}
	return nil
}

// Shutdown implements of.StateHandler.
func (p *Provider) Shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
}

// EventChannel implements of.EventHandler.
func (p *Provider) EventChannel() <-chan of.Event { return p.events }

func (p *Provider) handle(flag string) *sdk.Handle {
	if h, ok := p.handles.Load(flag); ok {
		return h.(*sdk.Handle)
	}
	h, _ := p.handles.LoadOrStore(flag, p.c.Switch(flag))
	return h.(*sdk.Handle)
}

func metadata(sw *wire.Switch, h *sdk.Handle) of.FlagMetadata {
	m := of.FlagMetadata{"source": h.Source().String()}
	if sw != nil {
		m["level"], m["state"], m["version"] = string(sw.Level), sw.State, sw.Version
	}
	return m
}

func notFound(flag string) of.ProviderResolutionDetail {
	return of.ProviderResolutionDetail{
		ResolutionError: of.NewFlagNotFoundResolutionError("no switch " + flag + " is published"),
		Reason:          of.ErrorReason,
	}
}

// BooleanEvaluation implements of.FeatureProvider: whether the switch is
// on for the subject.
func (p *Provider) BooleanEvaluation(ctx context.Context, flag string, defaultValue bool, flat of.FlattenedContext) of.BoolResolutionDetail {
	h := p.handle(flag)
	sw := h.Value()
	src := h.Source()
	if sw == nil && src != sdk.SourceEnv {
		return of.BoolResolutionDetail{Value: defaultValue, ProviderResolutionDetail: notFound(flag)}
	}
	if key, ok := flat[of.TargetingKey].(string); ok && key != "" {
		ctx = sdk.WithKey(ctx, key)
	}
	on := h.On(ctx)
	d := of.ProviderResolutionDetail{Variant: "off", FlagMetadata: metadata(sw, h)}
	if on {
		d.Variant = "on"
	}
	switch {
	case sw == nil: // environment fallback
		d.Reason = of.StaticReason
	case sw.State != wire.StateOn:
		d.Reason = of.DefaultReason
	case sw.Rollout.Basis() >= sdk.Buckets && sw.Rollout.Selector == "":
		d.Reason = of.StaticReason
	case on:
		d.Reason = of.TargetingMatchReason
	default:
		d.Reason = of.DefaultReason
	}
	return of.BoolResolutionDetail{Value: on, ProviderResolutionDetail: d}
}

// StringEvaluation implements of.FeatureProvider: the switch's level.
func (p *Provider) StringEvaluation(_ context.Context, flag string, defaultValue string, _ of.FlattenedContext) of.StringResolutionDetail {
	h := p.handle(flag)
	sw := h.Value()
	if sw == nil {
		return of.StringResolutionDetail{Value: defaultValue, ProviderResolutionDetail: notFound(flag)}
	}
	return of.StringResolutionDetail{Value: string(sw.Level), ProviderResolutionDetail: of.ProviderResolutionDetail{
		Reason: of.StaticReason, Variant: string(sw.Level), FlagMetadata: metadata(sw, h),
	}}
}

func mismatch(kind string) of.ProviderResolutionDetail {
	return of.ProviderResolutionDetail{
		ResolutionError: of.NewTypeMismatchResolutionError("switchyard switches are boolean (on) or string (level) flags, not " + kind),
		Reason:          of.ErrorReason,
	}
}

// FloatEvaluation implements of.FeatureProvider: always TYPE_MISMATCH.
func (p *Provider) FloatEvaluation(_ context.Context, _ string, defaultValue float64, _ of.FlattenedContext) of.FloatResolutionDetail {
	return of.FloatResolutionDetail{Value: defaultValue, ProviderResolutionDetail: mismatch("float")}
}

// IntEvaluation implements of.FeatureProvider: always TYPE_MISMATCH.
func (p *Provider) IntEvaluation(_ context.Context, _ string, defaultValue int64, _ of.FlattenedContext) of.IntResolutionDetail {
	return of.IntResolutionDetail{Value: defaultValue, ProviderResolutionDetail: mismatch("int")}
}

// ObjectEvaluation implements of.FeatureProvider: always TYPE_MISMATCH.
func (p *Provider) ObjectEvaluation(_ context.Context, _ string, defaultValue any, _ of.FlattenedContext) of.InterfaceResolutionDetail {
	return of.InterfaceResolutionDetail{Value: defaultValue, ProviderResolutionDetail: mismatch("object")}
}
