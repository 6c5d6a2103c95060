package sdk

import "github.com/switchyard-io/switchyard/sdk/wire"

// Switches returns the effective published value of every switch the
// client knows (live data, else the disk snapshot), by name, after the
// usual precedence (app override, app switch, global override, global
// switch). Names without a published value are absent: the environment
// and Default fallbacks are per-handle answers, not published values. It
// reads one immutable state, so the map is a consistent view of a single
// revision. The values are shared: do not modify them.
func (c *Client) Switches() map[string]*wire.Switch {
	s := c.state.Load()
	out := make(map[string]*wire.Switch, len(s.index))
	for name, i := range s.index {
		if e := s.at(i); e.sw != nil {
			out[name] = e.sw
		}
	}
	return out
}
