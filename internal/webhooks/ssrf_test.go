package webhooks_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/ssodir/ssodir/internal/webhooks"
)

// fakeResolver answers fixed addresses: name resolution is what the test is about.
type fakeResolver map[string][]string

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	ips, ok := r[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for _, s := range ips {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

func TestPublicAddresses(t *testing.T) {
	for s, want := range map[string]bool{
		"93.184.215.14": true, "2606:2800:21f:cb07:6820:80da:af6b:8b2c": true, "8.8.8.8": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "0.0.0.0": false, "255.255.255.255": false, "224.0.0.1": false, "::1": false, "::": false,
		"fe80::1": false, "fd00:ec2::254": false, "::ffff:127.0.0.1": false, "::ffff:8.8.8.8": true,
		"64:ff9b::a9fe:a9fe": false, "64:ff9b::808:808": true, "2001:db8::1": false,
	} {
		if got := webhooks.Public(netip.MustParseAddr(s)); got != want {
			t.Errorf("Public(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestCheckURLAllowsOnlyHTTPSToPublicAddresses(t *testing.T) {
	p := webhooks.Policy{Resolver: fakeResolver{
		"hooks.example.com": {"93.184.215.14"},
		"internal.example":  {"10.0.0.5"},
		"mixed.example":     {"93.184.215.14", "127.0.0.1"},
		"metadata.example":  {"169.254.169.254"},
	}}
	ctx := context.Background()
	for _, ok := range []string{"https://hooks.example.com/in", "https://93.184.215.14:8443/x?y=1", "https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/"} {
		if _, err := p.CheckURL(ctx, ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "hooks.example.com/in", "http://hooks.example.com/in", "ftp://hooks.example.com/", "https://user:pw@hooks.example.com/",
		"https://internal.example/", "https://mixed.example/", "https://metadata.example/", "https://127.0.0.1/", "https://localhost/",
		"https://a.localhost/", "https://[::1]/", "https://169.254.169.254/latest/meta-data", "https://unknown.example/",
		"https://hooks.example.com/#frag", "https://hooks.example.com:0/", "https://hooks.example.com:99999/", "https:///x",
		"https://[::ffff:10.0.0.1]/",
	} {
		if _, err := p.CheckURL(ctx, bad); err == nil {
			t.Errorf("%q taken", bad)
		}
	}
	dev := webhooks.Policy{AllowPrivate: true}
	for _, ok := range []string{"http://127.0.0.1:8080/hook", "http://localhost/hook", "https://10.0.0.5/"} {
		if _, err := dev.CheckURL(ctx, ok); err != nil {
			t.Errorf("with private addresses allowed, %s refused: %v", ok, err)
		}
	}
	if _, err := dev.CheckURL(ctx, "ftp://127.0.0.1/"); err == nil {
		t.Error("ftp taken")
	}
}
