// Package globaladdr tells the addresses of the public internet from every other: the IANA
// special-purpose address registries of both families (IPv4 and IPv6), kept here as one list,
// plus multicast, the deprecated forms (site-local, IPv4-compatible) and, for IPv6, everything
// outside the global unicast space 2000::/3. A server that fetches what an outsider names (a
// client metadata document) dials only addresses this package calls global, so that it cannot
// be turned on a cloud metadata service or an internal network.
package globaladdr

import "net/netip"

// Range is one special-purpose block: its prefix and what it is.
type Range struct {
	Prefix netip.Prefix
	Name   string
}

// Special lists the blocks that are never global, from the IANA IPv4 and IPv6 Special-Purpose
// Address Registries (as of 2025: RFC 6890 and its updates), with multicast and the deprecated
// blocks added. Blocks the registry marks globally reachable inside a larger special one (such
// as 192.0.0.9/32) are refused with it: no client metadata document is served from them. An
// IPv4-mapped IPv6 address (::ffff:0:0/96) is checked as its IPv4 address.
var Special = []Range{
	// IPv4
	{p("0.0.0.0/8"), `"this network" (RFC 791)`},
	{p("10.0.0.0/8"), "private use (RFC 1918)"},
	{p("100.64.0.0/10"), "shared address space, carrier-grade NAT (RFC 6598)"},
	{p("127.0.0.0/8"), "loopback (RFC 1122)"},
	{p("169.254.0.0/16"), "link local, cloud metadata services (RFC 3927)"},
	{p("172.16.0.0/12"), "private use (RFC 1918)"},
	{p("192.0.0.0/24"), "IETF protocol assignments (RFC 6890)"},
	{p("192.0.2.0/24"), "documentation TEST-NET-1 (RFC 5737)"},
	{p("192.31.196.0/24"), "AS112-v4 (RFC 7535)"},
	{p("192.52.193.0/24"), "AMT (RFC 7450)"},
	{p("192.88.99.0/24"), "deprecated 6to4 relay anycast (RFC 7526)"},
	{p("192.168.0.0/16"), "private use (RFC 1918)"},
	{p("192.175.48.0/24"), "direct delegation AS112 service (RFC 7534)"},
	{p("198.18.0.0/15"), "benchmarking (RFC 2544)"},
	{p("198.51.100.0/24"), "documentation TEST-NET-2 (RFC 5737)"},
	{p("203.0.113.0/24"), "documentation TEST-NET-3 (RFC 5737)"},
	{p("224.0.0.0/4"), "multicast (RFC 5771)"},
	{p("240.0.0.0/4"), "reserved (RFC 1112)"},
	{p("255.255.255.255/32"), "limited broadcast (RFC 919)"},
	// IPv6
	{p("::/128"), "unspecified address (RFC 4291)"},
	{p("::1/128"), "loopback (RFC 4291)"},
	{p("::/96"), "deprecated IPv4-compatible addresses (RFC 4291)"},
	{p("::ffff:0:0/96"), "IPv4-mapped addresses (RFC 4291), checked as their IPv4 address"},
	{p("64:ff9b::/96"), "IPv4-IPv6 translation, NAT64 (RFC 6052)"},
	{p("64:ff9b:1::/48"), "IPv4-IPv6 local-use translation (RFC 8215)"},
	{p("100::/64"), "discard-only (RFC 6666)"},
	{p("100:0:0:1::/64"), "dummy IPv6 prefix (RFC 9780)"},
	{p("2001::/23"), "IETF protocol assignments: Teredo, benchmarking, ORCHID (RFC 2928)"},
	{p("2001:db8::/32"), "documentation (RFC 3849)"},
	{p("2002::/16"), "6to4, with an IPv4 address inside (RFC 3056)"},
	{p("2620:4f:8000::/48"), "direct delegation AS112 service (RFC 7534)"},
	{p("3fff::/20"), "documentation (RFC 9637)"},
	{p("5f00::/16"), "segment routing SIDs (RFC 9602)"},
	{p("fc00::/7"), "unique local (RFC 4193)"},
	{p("fe80::/10"), "link-local unicast (RFC 4291)"},
	{p("fec0::/10"), "deprecated site-local (RFC 3879)"},
	{p("ff00::/8"), "multicast (RFC 4291)"},
}

// globalUnicast6 is the only IPv6 space handed out for the public internet (RFC 4291).
var globalUnicast6 = p("2000::/3")

func p(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// Why returns what makes an address non-global ("" when it is global): the special block it
// falls in, or why it is not in one of the public spaces at all.
func Why(a netip.Addr) string {
	if !a.IsValid() {
		return "not an IP address"
	}
	if a.Zone() != "" {
		return "an address with a zone"
	}
	if a.Is4In6() {
		a = a.Unmap()
	}
	for _, r := range Special {
		if r.Prefix.Contains(a) {
			return r.Prefix.String() + ": " + r.Name
		}
	}
	if a.Is6() && !globalUnicast6.Contains(a) {
		return "outside the IPv6 global unicast space 2000::/3"
	}
	return ""
}

// IsGlobal reports whether a is an address of the public internet.
func IsGlobal(a netip.Addr) bool { return Why(a) == "" }
