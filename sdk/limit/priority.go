package limit

// Criticality ranks a request for shedding (the SRE book's criticalities;
// the P0/P1/P2 grading of features): under overload every limiter sheds
// sheddable requests first, then degradable ones, and keeps capacity for
// critical ones. The zero value is Critical, so traffic that carries no
// criticality keeps every limiter's plain behaviour.
type Criticality uint8

// Criticalities, highest first.
const (
	Critical   Criticality = iota // must be served: payments, log-in, the core read path
	Degradable                    // may be refused under overload; callers fall back
	Sheddable                     // refused first: prefetch, analytics, batch, retries of best-effort work
)

var criticalityNames = [...]string{"critical", "degradable", "sheddable"}

func (c Criticality) String() string {
	if int(c) < len(criticalityNames) {
		return criticalityNames[c]
	}
	return "critical"
}

// ParseCriticality reads "critical", "degradable" or "sheddable"; anything
// else is not a criticality.
func ParseCriticality(s string) (Criticality, bool) {
	for i, n := range criticalityNames {
		if s == n {
			return Criticality(i), true
		}
	}
	return Critical, false
}

// Share is the fraction of a limiter's capacity a request of criticality c
// may use when a rule reserves reserve (0 ≤ reserve ≤ 0.45) per step:
// critical 1, degradable 1 − reserve, sheddable 1 − 2·reserve. With reserve
// 0 every class shares all the capacity.
func (c Criticality) Share(reserve float64) float64 {
	switch c {
	case Degradable:
		return 1 - reserve
	case Sheddable:
		return 1 - 2*reserve
	}
	return 1
}

// shareOf returns ceil-free share of n for c: the count a class may hold,
// at least 1 when n ≥ 1 so no class is starved outright by rounding.
func shareOf(n int, c Criticality, reserve float64) int {
	if c == Critical || reserve <= 0 {
		return n
	}
	return max(int(float64(n)*c.Share(reserve)), min(n, 1))
}
