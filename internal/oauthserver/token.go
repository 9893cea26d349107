package oauthserver

import (
	"net/url"
	"time"
)

// CodeRequest is an authorization_code token request (RFC 6749 section 4.1.3 with RFC 7636).
type CodeRequest struct {
	Code        string
	RedirectURI string
	Verifier    string
}

// ReadCodeRequest reads the parameters of an authorization_code token request; each is required.
func ReadCodeRequest(f url.Values) (CodeRequest, *Error) {
	cr := CodeRequest{Code: f.Get("code"), RedirectURI: f.Get("redirect_uri"), Verifier: f.Get("code_verifier")}
	switch {
	case cr.Code == "":
		return cr, BadRequest("invalid_request", "code is required.")
	case cr.RedirectURI == "":
		return cr, BadRequest("invalid_request", "redirect_uri is required: the one sent to the authorization endpoint.")
	case cr.Verifier == "":
		return cr, BadRequest("invalid_request", "code_verifier is required (PKCE).")
	}
	return cr, nil
}

// IssuedCode is what an authorization code was issued for.
type IssuedCode struct {
	ClientID    string
	RedirectURI string
	Challenge   string // S256
	Resource    string // canonical
	Expires     time.Time
}

// CheckRedemption checks the redemption of an unused code by clientID at now: not expired,
// this client's, the same redirect URI, the verifier of its challenge, and the same resource
// when the request names one (f is the token request). It returns what is wrong, for a log,
// and the error to answer.
func (ic IssuedCode) CheckRedemption(now time.Time, clientID string, cr CodeRequest, f url.Values) (reason string, e *Error) {
	switch {
	case !now.Before(ic.Expires):
		return "authorization code expired", BadRequest("invalid_grant", "The authorization code has expired.")
	case ic.ClientID != clientID:
		return "authorization code presented by another client", BadRequest("invalid_grant", "The authorization code was issued to another client.")
	case ic.RedirectURI != cr.RedirectURI:
		return "authorization code presented with another redirect URI", BadRequest("invalid_grant", "redirect_uri does not match the one of the authorization request.")
	case !VerifierMatches(cr.Verifier, ic.Challenge):
		return "PKCE verifier does not match", BadRequest("invalid_grant", "code_verifier does not match the code_challenge.")
	}
	if e := CheckResourceParam(f, ic.Resource); e != nil {
		e.Description = "resource must be " + ic.Resource + ", as in the authorization request."
		return "authorization code presented for another resource", e
	}
	return "", nil
}
