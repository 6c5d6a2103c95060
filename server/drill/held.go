package drill

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
)

// A drill created or changed on a protected app waits for approval as a
// change request (server.HoldAs). The request keeps the call's body with
// the probes' header values sealed, as the drills table keeps them;
// ApplyHeld opens them and makes the call again.

// heldCreate is the create as a change request stores it.
func (s *Service) heldCreate(app string, in Input) *server.Pending {
	in.Spec = sealHeaders(in.Spec, s.cfg.Keys)
	return server.HoldAs(audit.DrillCreate, app, in.Name, in)
}

// heldUpdate is the patch as a change request stores it.
func (s *Service) heldUpdate(app, name string, p server.Patch) *server.Pending {
	p.Fields = s.mapProbes(p.Fields, func(sp *Spec) error { *sp = sealHeaders(*sp, s.cfg.Keys); return nil })
	return server.HoldAs(audit.DrillUpdate, app, name, p)
}

// mapProbes applies fn to the probes a merge patch names, if any.
func (s *Service) mapProbes(fields json.RawMessage, fn func(*Spec) error) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(fields, &m) != nil {
		return fields
	}
	raw, ok := m["probes"]
	if !ok {
		return fields
	}
	var sp Spec
	if json.Unmarshal(raw, &sp.Probes) != nil || fn(&sp) != nil {
		return fields
	}
	m["probes"], _ = json.Marshal(sp.Probes)
	out, _ := json.Marshal(m)
	return out
}

// ApplyHeld applies an approved request of a drill's create or update as
// a (server.Service.OnApplyPending).
func (s *Service) ApplyHeld(ctx context.Context, a server.Actor, p server.Pending) error {
	switch p.Kind {
	case string(audit.DrillCreate):
		var in Input
		if err := json.Unmarshal(p.Body, &in); err != nil {
			return err
		}
		if err := s.openHeaders(&in.Spec); err != nil {
			return err
		}
		_, err := s.Create(ctx, a, p.App, in)
		return err
	case string(audit.DrillUpdate):
		var patch server.Patch
		if err := json.Unmarshal(p.Body, &patch); err != nil {
			return err
		}
		var openErr error
		patch.Fields = s.mapProbes(patch.Fields, func(sp *Spec) error { openErr = s.openHeaders(sp); return openErr })
		if openErr != nil {
			return openErr
		}
		_, err := s.Update(ctx, a, p.App, p.Name, patch)
		return err
	}
	return fmt.Errorf("drill: no held change of kind %s", p.Kind)
}

// openHeaders opens the sealed probe header values of sp in place.
func (s *Service) openHeaders(sp *Spec) error {
	for i := range sp.Probes {
		for k, v := range sp.Probes[i].Headers {
			plain, err := s.cfg.Keys.Open(v)
			if err != nil {
				return fmt.Errorf("drill: probes[%d].headers %q: %w", i, k, err)
			}
			sp.Probes[i].Headers[k] = plain
		}
	}
	return nil
}
