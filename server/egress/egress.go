// Package egress guards the requests the console sends on a user's behalf:
// drill probes and webhook deliveries. A user who may save a URL must not
// reach what sits beside the console — its etcd, its database, its own API,
// a cloud metadata service, anything on a private network — unless an
// admin allowlisted it.
//
// The check runs where the connection is made (net.Dialer.Control sees the
// address actually dialled), so a name that resolves to 127.0.0.1, or
// resolves differently on the second lookup (DNS rebinding), is refused
// like the literal address. Save-time checks (CheckURL) only give a clear
// early answer for literal hosts; they are not the guard. The client never
// follows redirects and uses no proxy from the environment.
//
// The package must not log or return a response body: callers decide what
// of an answer they keep.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrRefused is what every refusal wraps.
var ErrRefused = errors.New("egress: refused")

// RefusedError says which address was refused and why.
type RefusedError struct {
	Addr string // the address dialled (or the literal host of a URL)
	Why  string // "loopback", "private", "the console's etcd", …
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("egress: %s refused (%s); an admin can allow it with --egress-allow", e.Addr, e.Why)
}

// Unwrap makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// Config describes a guard.
type Config struct {
	// Allow lists what may be reached even though a rule refuses it:
	// CIDRs ("10.1.0.0/16", "127.0.0.1/32") or host:port ("127.0.0.1:8070",
	// "hooks.internal:443"). An entry here also overrides Protected.
	Allow []string
	// Protected are the console's own endpoints, refused whatever the
	// address class (even with AllowLoopback): its listener, its etcd
	// endpoints, its database. URLs or host:port; a loopback or
	// unspecified host protects the port on every local address.
	Protected []string
	// AllowLoopback lets loopback addresses through (the all-embedded
	// quickstart, where the demo service runs beside the console).
	AllowLoopback bool
	// Resolver looks names up (nil: the system's). Tests point it at a
	// name server of their own to make a name resolve to loopback.
	Resolver *net.Resolver
}

// Guard decides which addresses may be dialled. Its zero value is not
// usable; New makes one. Safe for concurrent use.
type Guard struct {
	rules atomic.Pointer[rules]
}

type rules struct {
	allowNets     []netip.Prefix
	allowHostPort map[string]bool // "host:port", host lower-case, IPs canonical
	protected     map[string]string
	protectedPort map[uint16]string // ports protected on every local address
	allowLoopback bool
	resolver      *net.Resolver
}

// New parses c; the error names the bad entry.
func New(c Config) (*Guard, error) {
	r := &rules{allowHostPort: map[string]bool{}, protected: map[string]string{}, protectedPort: map[uint16]string{}, allowLoopback: c.AllowLoopback, resolver: c.Resolver}
	if err := r.addAllow(c.Allow); err != nil {
		return nil, err
	}
	for _, p := range c.Protected {
		hp := hostPort(p)
		if hp == "" {
			continue
		}
		host, port, _ := net.SplitHostPort(hp)
		if a, ok := literalIP(host); (ok && (a.IsUnspecified() || a.IsLoopback())) || loopbackName(host) {
			if n, err := strconv.ParseUint(port, 10, 16); err == nil {
				r.protectedPort[uint16(n)] = "the console's own endpoint " + hp
			}
			continue
		}
		r.protected[canonical(hp)] = "the console's own endpoint " + hp
	}
	g := &Guard{}
	g.rules.Store(r)
	return g, nil
}

// Strict is a guard with no allowlist and nothing protected beyond the
// address classes: what a component uses when it was given none.
func Strict() *Guard {
	g, _ := New(Config{})
	return g
}

// Allow adds allowlist entries (CIDRs or host:port) to the guard. Tests
// use it to reach the receiver they just started.
func (g *Guard) Allow(entries ...string) error {
	old := g.rules.Load()
	r := *old
	r.allowNets = append([]netip.Prefix(nil), old.allowNets...)
	r.allowHostPort = make(map[string]bool, len(old.allowHostPort)+len(entries))
	for k := range old.allowHostPort {
		r.allowHostPort[k] = true
	}
	if err := r.addAllow(entries); err != nil {
		return err
	}
	g.rules.Store(&r)
	return nil
}

func (r *rules) addAllow(entries []string) error {
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			r.allowNets = append(r.allowNets, p.Masked())
			continue
		}
		host, port, err := net.SplitHostPort(e)
		if err != nil || host == "" {
			return fmt.Errorf("egress: allow %q: want a CIDR (10.0.0.0/8) or host:port (127.0.0.1:8070)", e)
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("egress: allow %q: bad port", e)
		}
		r.allowHostPort[canonical(e)] = true
	}
	return nil
}

// AllowsLoopback reports whether loopback addresses pass.
func (g *Guard) AllowsLoopback() bool { return g.rules.Load().allowLoopback }

// Allowlisted reports whether rawURL's host:port is named by the
// allowlist (a host:port entry, or a CIDR holding its literal address).
// Drills let non-admins use methods and headers only towards such hosts.
func (g *Guard) Allowlisted(rawURL string) bool {
	hp := hostPort(rawURL)
	if hp == "" {
		return false
	}
	r := g.rules.Load()
	if r.allowHostPort[canonical(hp)] {
		return true
	}
	host, port, _ := net.SplitHostPort(hp)
	if a, ok := literalIP(host); ok {
		n, _ := strconv.ParseUint(port, 10, 16)
		return r.allowedAddr(netip.AddrPortFrom(a, uint16(n)))
	}
	return false
}

// CheckURL is the save-time check of a URL: a literal host (an IP in any
// of its spellings, or a loopback name such as "localhost.") that the guard
// refuses is refused now, with a RefusedError; a name is checked when it
// is dialled.
func (g *Guard) CheckURL(rawURL string) error {
	hp := hostPort(rawURL)
	if hp == "" {
		return nil // the caller's own validation names the bad URL
	}
	host, port, _ := net.SplitHostPort(hp)
	r := g.rules.Load()
	if r.allowHostPort[canonical(hp)] {
		return nil
	}
	n, _ := strconv.ParseUint(port, 10, 16)
	if a, ok := literalIP(host); ok {
		return r.check(netip.AddrPortFrom(a, uint16(n)))
	}
	if why := r.protected[canonical(hp)]; why != "" {
		return &RefusedError{Addr: hp, Why: why}
	}
	if loopbackName(host) {
		return r.check(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(n)))
	}
	if metadataName(host) {
		return &RefusedError{Addr: hp, Why: "a cloud metadata service"}
	}
	return nil
}

// Check decides one address about to be dialled.
func (g *Guard) Check(ap netip.AddrPort) error { return g.rules.Load().check(ap) }

func (r *rules) allowedAddr(ap netip.AddrPort) bool {
	a := ap.Addr().Unmap()
	if r.allowHostPort[netip.AddrPortFrom(a, ap.Port()).String()] {
		return true
	}
	for _, p := range r.allowNets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (r *rules) check(ap netip.AddrPort) error {
	a := ap.Addr().Unmap().WithZone("")
	ap = netip.AddrPortFrom(a, ap.Port())
	if r.allowedAddr(ap) {
		return nil
	}
	if why := r.protected[ap.String()]; why != "" {
		return &RefusedError{Addr: ap.String(), Why: why}
	}
	if why := r.protectedPort[ap.Port()]; why != "" && isLocal(a) {
		return &RefusedError{Addr: ap.String(), Why: why}
	}
	why := classify(a)
	if why == "" || (why == "loopback" && r.allowLoopback) {
		return nil
	}
	return &RefusedError{Addr: ap.String(), Why: why}
}

// Client returns an HTTP client whose every connection passes the guard:
// no proxy, no redirects (a redirect is the answer). keepAlive keeps
// connections for the next request (drill probes measure the endpoint's
// latency, not a TCP handshake per request; a kept connection was checked
// when it was dialled); without it nothing lingers after a request
// (webhook deliveries are rare). timeout bounds the dial; the caller's
// context bounds the request.
func (g *Guard) Client(timeout time.Duration, keepAlive bool) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         g.DialContext(timeout),
			TLSHandshakeTimeout: 5 * time.Second,
			DisableKeepAlives:   !keepAlive,
			IdleConnTimeout:     90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// DialContext returns a dial function that refuses what the guard refuses.
// A host:port allowlist entry is honoured for the name dialled; every
// other connection is judged by the address it actually reaches.
func (g *Guard) DialContext(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		r := g.rules.Load()
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if why := r.protected[canonical(addr)]; why != "" && !r.allowHostPort[canonical(addr)] {
			return nil, &RefusedError{Addr: addr, Why: why}
		}
		if a, ok := literalIP(host); ok {
			addr = net.JoinHostPort(a.String(), port) // never hand a numeric trick to the resolver
		}
		named := r.allowHostPort[canonical(addr)]
		d := &net.Dialer{Timeout: timeout, Resolver: r.resolver, Control: func(_, address string, _ syscall.RawConn) error {
			if named {
				return nil
			}
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &RefusedError{Addr: address, Why: "not an IP address"}
			}
			return r.check(ap)
		}}
		return d.DialContext(ctx, network, addr)
	}
}

// classify names the class of address that is refused by default, or ""
// for a public unicast address.
func classify(a netip.Addr) string {
	switch {
	case metadata[a]:
		return "a cloud metadata service"
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	case a.IsPrivate():
		return "private"
	}
	for _, p := range reserved {
		if p.Contains(a) {
			if a.Is6() && (p == nat64 || p == sixToFour) {
				var v4 [4]byte
				b := a.As16()
				if p == nat64 {
					copy(v4[:], b[12:])
				} else {
					copy(v4[:], b[2:6])
				}
				if why := classify(netip.AddrFrom4(v4)); why != "" {
					return why + " (embedded in " + p.String() + ")"
				}
				return ""
			}
			return "reserved (" + p.String() + ")"
		}
	}
	return ""
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	// reserved are ranges no probe or webhook has business with.
	reserved = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),     // "this network": 0.x reaches the local host on Linux
		netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT (shared address space)
		netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
		netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
		netip.MustParsePrefix("240.0.0.0/4"),   // reserved, and the broadcast address
		netip.MustParsePrefix("::/96"),         // IPv4-compatible (deprecated)
		netip.MustParsePrefix("100::/64"),      // discard-only
		nat64,
		sixToFour,
	}
	// metadata are the instance metadata services of the big clouds; some
	// sit outside the private and link-local ranges.
	metadata = map[netip.Addr]bool{
		netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OpenStack, …
		netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
		netip.MustParseAddr("fd00:ec2::254"):   true, // AWS IPv6
		netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
		netip.MustParseAddr("168.63.129.16"):   true, // Azure WireServer
		netip.MustParseAddr("192.0.0.192"):     true, // Oracle Cloud
	}
)

// isLocal reports whether a is an address of this host.
func isLocal(a netip.Addr) bool {
	if a.IsLoopback() || a.IsUnspecified() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, ia := range addrs {
		if p, err := netip.ParsePrefix(ia.String()); err == nil && p.Addr().Unmap() == a {
			return true
		}
	}
	return false
}

// hostPort returns the host:port a URL (or a bare host:port) names, with
// the scheme's default port; "" when it names none.
func hostPort(raw string) string {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		if _, _, err := net.SplitHostPort(raw); err == nil {
			return raw
		}
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "postgres", "postgresql":
			port = "5432"
		default:
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// canonical spells host:port one way: a lower-case name without its
// trailing dot, or the canonical form of a literal IP.
func canonical(hp string) string {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return strings.ToLower(hp)
	}
	if a, ok := literalIP(host); ok {
		return netip.AddrPortFrom(a, mustPort(port)).String()
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.ToLower(host), "."), port)
}

func mustPort(s string) uint16 {
	n, _ := strconv.ParseUint(s, 10, 16)
	return uint16(n)
}

// literalIP parses host as an IP address in any spelling a resolver might
// accept: IPv6 (with or without brackets, zone dropped, IPv4-mapped
// unmapped), dotted IPv4, and the inet_aton forms with fewer parts or
// octal/hex parts ("2130706433", "0x7f.1", "0177.0.0.1", "127.1").
func literalIP(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().WithZone(""), true
	}
	host = strings.TrimSuffix(host, ".")
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, ok := inetAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	last := len(vals) - 1
	for i, v := range vals[:last] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	if vals[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// inetAtonPart parses one part of an inet_aton address: decimal, octal
// (leading 0) or hex (leading 0x).
func inetAtonPart(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "":
		return 0, false
	case strings.HasPrefix(strings.ToLower(p), "0x"):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	v, err := strconv.ParseUint(p, base, 32)
	return v, err == nil
}

// loopbackName reports names every resolver maps to loopback.
func loopbackName(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return h == "localhost" || strings.HasSuffix(h, ".localhost") || h == "ip6-localhost" || h == "ip6-loopback"
}

// metadataName reports the metadata services' well-known names.
func metadataName(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return h == "metadata.google.internal" || h == "metadata" || h == "instance-data" || h == "instance-data.ec2.internal"
}
