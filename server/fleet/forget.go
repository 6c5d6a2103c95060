package fleet

// The model forgets what no longer exists, so that its memory follows the
// live fleet, not everything it ever saw: instances go with their keys
// (deleteInstance), and at every Sample a switch name, a limit rule or an
// app that nothing live refers to any more goes once its history has run
// out (HistoryLength after its last sample), so its sparkline fades
// rather than vanishing.

// liveSwitches marks the interned names something refers to now: a
// published value or override, or a live instance's counters or reads.
func (a *appState) liveSwitches() []bool {
	live := make([]bool, len(a.names))
	for i, name := range a.names {
		_, live[i] = a.effective(name)
	}
	for _, in := range a.instances {
		for i := range in.switches {
			live[i] = true
		}
		for i, at := range in.reads {
			if at > 0 {
				live[i] = true
			}
		}
	}
	return live
}

// liveLimits is the set of limit rules a live instance reports.
func (a *appState) liveLimits() map[string]bool {
	live := map[string]bool{}
	for _, in := range a.instances {
		for res := range in.limits {
			live[res] = true
		}
	}
	return live
}

// forget drops, in every app, the history of switches and limit rules
// nothing live refers to whose newest sample is before cut (unix seconds),
// the interned names left without a referent or a history, and then the
// apps left empty. Callers hold m.mu.
func (m *Model) forget(cut int64) {
	for name, a := range m.apps {
		live := a.liveSwitches()
		keep := make([]bool, len(a.names))
		dead := 0
		for i := range a.names {
			r := a.swHist[uint32(i)]
			if !live[i] && r != nil && r.newest() < cut {
				delete(a.swHist, uint32(i))
				r = nil
			}
			if keep[i] = live[i] || r != nil; !keep[i] {
				dead++
			}
		}
		if dead > 0 {
			a.compact(keep)
		}
		liveLim := a.liveLimits()
		for res, r := range a.limHist {
			if !liveLim[res] && r.newest() < cut {
				delete(a.limHist, res)
			}
		}
		if len(a.instances) == 0 && len(a.switches) == 0 && len(a.overrides) == 0 && len(a.names) == 0 && len(a.limHist) == 0 {
			delete(m.apps, name)
		}
	}
}

// compact interns anew only the names keep marks, and renumbers what is
// indexed by them: the instances' counters and reads, and the history.
func (a *appState) compact(keep []bool) {
	renum := make([]uint32, len(a.names))
	names := make([]string, 0, len(a.names))
	index := make(map[string]uint32, len(a.names))
	for i, name := range a.names {
		if keep[i] {
			renum[i] = uint32(len(names))
			index[name] = renum[i]
			names = append(names, name)
		}
	}
	hist := make(map[uint32]*ring, len(a.swHist))
	for i, r := range a.swHist {
		hist[renum[i]] = r // a name with a history is kept
	}
	for _, in := range a.instances {
		// A live instance's entries are live names, kept.
		sw := make(map[uint32]*switchSig, len(in.switches))
		for i, sig := range in.switches {
			sw[renum[i]] = sig
		}
		in.switches = sw
		var reads []uint32
		for i, at := range in.reads {
			if at == 0 {
				continue
			}
			for int(renum[i]) >= len(reads) {
				reads = append(reads, 0)
			}
			reads[renum[i]] = at
		}
		in.reads = reads
	}
	a.names, a.index, a.swHist = names, index, hist
}
