package globaladdr

import (
	"net/netip"
	"testing"
)

// last returns the last address of a prefix.
func last(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// TestSpecialRangesAreRefused: the first, a middle and the last address of every block of the
// list are refused, IPv4 ones also in their IPv4-mapped IPv6 form.
func TestSpecialRangesAreRefused(t *testing.T) {
	t.Parallel()
	for _, r := range Special {
		first := r.Prefix.Masked().Addr()
		mid := first.Next()
		for _, a := range []netip.Addr{first, mid, last(r.Prefix)} {
			if IsGlobal(a) {
				t.Errorf("%s (%s) is taken for global", a, r.Name)
			}
			if a.Is4() {
				if m := netip.AddrFrom16(a.As16()); IsGlobal(m) {
					t.Errorf("%s, the mapped form of %s (%s), is taken for global", m, a, r.Name)
				}
			}
		}
	}
}

// TestAddresses: the ranges the issue names, the embedded IPv4 forms (NAT64, 6to4,
// IPv4-compatible, mapped) of public IPv4 addresses, addresses outside 2000::/3, and the
// public addresses that must stay reachable.
func TestAddresses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr   string
		global bool
	}{
		{"100.64.0.1", false}, {"100.127.255.254", false}, {"192.0.0.8", false}, {"192.0.0.170", false},
		{"198.18.0.1", false}, {"198.19.255.255", false}, {"0.0.0.0", false}, {"0.1.2.3", false},
		{"240.0.0.1", false}, {"255.255.255.255", false}, {"169.254.169.254", false}, {"10.1.2.3", false},
		{"172.31.255.255", false}, {"192.168.1.1", false}, {"127.0.0.53", false}, {"224.0.0.251", false},
		{"192.0.2.10", false}, {"198.51.100.7", false}, {"203.0.113.9", false},
		{"64:ff9b::808:808", false}, {"64:ff9b::169.254.169.254", false}, {"64:ff9b:1::a00:1", false},
		{"2002:808:808::1", false}, {"2002:a9fe:a9fe::1", false}, {"::8.8.8.8", false}, {"::169.254.169.254", false},
		{"::ffff:169.254.169.254", false}, {"::ffff:127.0.0.1", false}, {"::ffff:100.64.0.1", false},
		{"fec0::1", false}, {"feff::1", false}, {"fe80::1", false}, {"fd00:ec2::254", false}, {"fc00::1", false},
		{"::1", false}, {"::", false}, {"ff02::1", false}, {"2001:db8::1", false}, {"2001::1", false},
		{"3fff::1", false}, {"100::1", false}, {"4000::1", false}, {"1::1", false}, {"5f00::1", false},
		{"fe80::1%eth0", false},
		{"8.8.8.8", true}, {"1.1.1.1", true}, {"93.184.215.14", true}, {"::ffff:8.8.8.8", true},
		{"2606:4700:4700::1111", true}, {"2a00:1450:4001:80b::200e", true},
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := IsGlobal(a); got != tc.global {
			t.Errorf("IsGlobal(%s) = %v, want %v (%s)", tc.addr, got, tc.global, Why(a))
		}
	}
	if IsGlobal(netip.Addr{}) {
		t.Error("the zero Addr is taken for global")
	}
}
