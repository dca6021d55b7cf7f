package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// MaxURL bounds an endpoint's URL.
const MaxURL = 2048

// nonPublic are the address ranges a webhook never reaches unless private addresses are
// allowed (SSO_WEBHOOKS_ALLOW_PRIVATE): loopback, private, link-local (the cloud metadata
// service), shared, reserved, documentation and multicast ranges (IANA special-purpose
// registries).
var nonPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32", "2002::/16",
		"fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// nat64 is the well-known NAT64 prefix: its addresses carry an IPv4 address, judged as such.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Public reports whether ip is a public unicast address a webhook may reach.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return false
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		return Public(netip.AddrFrom4([4]byte(b[12:])))
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// ErrNotPublic is a URL or an address a webhook may not reach.
var ErrNotPublic = errors.New("is not a public address")

// Policy is what a webhook may reach.
type Policy struct {
	// AllowPrivate (SSO_WEBHOOKS_ALLOW_PRIVATE) allows http and every address: development
	// and tests.
	AllowPrivate bool
	// Resolver looks names up (nil: net.DefaultResolver).
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
}

func (p Policy) resolver() interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
} {
	if p.Resolver == nil {
		return net.DefaultResolver
	}
	return p.Resolver
}

// CheckURL checks an endpoint's URL at registration: absolute, https (http too with
// AllowPrivate), no credentials, and a host whose every address is public (with
// AllowPrivate: any). The message of the error is fit for a 400's field.
func (p Policy) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("is required")
	}
	if len(raw) > MaxURL {
		return nil, fmt.Errorf("is longer than %d characters", MaxURL)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return nil, errors.New("must be an absolute URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowPrivate:
	default:
		return nil, errors.New("must be an https URL")
	}
	if u.User != nil {
		return nil, errors.New("must not hold credentials")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, errors.New("must not hold a fragment")
	}
	host := u.Hostname()
	if host == "" {
		return nil, errors.New("must name a host")
	}
	if port := u.Port(); port != "" {
		if n, err := netip.ParseAddrPort("0.0.0.0:" + port); err != nil || n.Port() == 0 {
			return nil, errors.New("has an invalid port")
		}
	}
	if p.AllowPrivate {
		return u, nil
	}
	if _, err := p.Resolve(ctx, host); err != nil {
		return nil, err
	}
	return u, nil
}

// Resolve is the addresses of host a webhook may reach: every one of them must be public
// (a name with one private address among public ones is refused: DNS could answer with
// either), unless AllowPrivate.
func (p Policy) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if !p.AllowPrivate && !Public(ip) {
			return nil, ErrNotPublic
		}
		return []netip.Addr{ip.Unmap()}, nil
	}
	lower := strings.ToLower(strings.TrimSuffix(host, "."))
	if !p.AllowPrivate && (lower == "localhost" || strings.HasSuffix(lower, ".localhost")) {
		return nil, ErrNotPublic
	}
	ips, err := p.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return nil, errors.New("names a host that does not resolve")
	}
	for i, ip := range ips {
		ips[i] = ip.Unmap()
		if !p.AllowPrivate && !Public(ip) {
			return nil, ErrNotPublic
		}
	}
	return ips, nil
}

// dialContext resolves the host once, checks the addresses and dials only those checked:
// a DNS answer that changes between the check and the connection (rebinding) cannot
// lead the delivery elsewhere.
func (p Policy) dialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := p.Resolve(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("webhook host %s %w", host, err)
		}
		var last error
		for _, ip := range ips {
			c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
			if err == nil {
				return c, nil
			}
			last = err
		}
		return nil, last
	}
}
