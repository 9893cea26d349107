package oauthserver

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// MaxURILength is the longest redirect URI either server accepts.
const MaxURILength = 2000

// CanonicalResource normalises a resource indicator (RFC 8707): absolute, no fragment or user
// info; scheme and host in lower case, default port and trailing slash dropped.
func CanonicalResource(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" || u.User != nil || strings.Contains(raw, "#") {
		return "", false
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		u.Host = strings.TrimSuffix(u.Host, ":"+p)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u.String(), true
}

// CheckResourceParam checks the optional resource parameter of a token request (RFC 8707
// section 2.2): when given, it must name bound, the resource the grant was made for.
func CheckResourceParam(f url.Values, bound string) *Error {
	res := f.Get("resource")
	if res == "" {
		return nil
	}
	if cr, ok := CanonicalResource(res); !ok || cr != bound {
		return BadRequest("invalid_target", "resource must be "+bound+".")
	}
	return nil
}

// CheckRedirectURI accepts an absolute https URI, or an http URI on a host isLoopback accepts
// (RFC 8252 section 7.3), without fragment or user info and with a valid port, if any.
func CheckRedirectURI(raw string, isLoopback func(host string) bool) error {
	u, err := url.Parse(raw)
	switch {
	case len(raw) > MaxURILength:
		return fmt.Errorf("a redirect URI is longer than %d bytes", MaxURILength)
	case err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "":
		return fmt.Errorf("redirect URI %q is not an absolute URI", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("redirect URI %q must not have a fragment", raw)
	case u.User != nil:
		return fmt.Errorf("redirect URI %q must not carry user info", raw)
	case !ValidPort(u.Port()):
		return fmt.Errorf("redirect URI %q has an invalid port", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("redirect URI %q: http is allowed only on a loopback host; use https", raw)
	}
	return fmt.Errorf("redirect URI %q: the scheme must be https, or http on a loopback host", raw)
}

// ValidPort accepts an empty port or a decimal port from 1 to 65535 without a leading zero.
func ValidPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n < 65536 && p[0] != '0'
}

// WithQuery adds params to the query of uri, keeping the query it has.
func WithQuery(uri string, params url.Values) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	return u.String()
}
