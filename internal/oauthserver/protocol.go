package oauthserver

import (
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// MaxBodyBytes caps the body of a registration, token or revocation request.
const MaxBodyBytes = 64 << 10

// GrantTypes are the grant types both servers support.
var GrantTypes = []string{"authorization_code", "refresh_token"}

// DeviceGrantType is the RFC 8628 device authorization grant, which the sandbox supports besides
// GrantTypes (a guess of the contract: the card service's document shows none).
const DeviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"

// Error is an OAuth error answer (RFC 6749 section 5.2, RFC 7591 section 3.2.2) with its
// HTTP status.
type Error struct {
	Status      int    `json:"-"`
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// BadRequest is an error answered with 400.
func BadRequest(code, desc string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Description: desc}
}

// Error returns the code and the description.
func (e *Error) Error() string { return e.Code + ": " + e.Description }

// TokenResponse is a successful token endpoint answer (RFC 6749 section 5.1).
type TokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
}

// WriteJSON writes an encoded JSON answer that is never cached (RFC 6749 section 5.1).
func WriteJSON(w http.ResponseWriter, status int, data []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// ReadForm reads the application/x-www-form-urlencoded body of a token or revocation request;
// a repeated parameter is refused (RFC 6749 section 3.2).
func ReadForm(w http.ResponseWriter, r *http.Request) (url.Values, *Error) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, BadRequest("invalid_request", "Send the parameters as application/x-www-form-urlencoded.")
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return nil, BadRequest("invalid_request", "The request body could not be read or is larger than 64 KiB.")
	}
	f, err := url.ParseQuery(string(data))
	if err != nil {
		return nil, BadRequest("invalid_request", "The request body is not valid form encoding.")
	}
	if k := RepeatedParam(f); k != "" {
		return nil, BadRequest("invalid_request", "The parameter "+k+" is given more than once.")
	}
	return f, nil
}

// RepeatedParam returns a parameter given more than once, or "".
func RepeatedParam(q url.Values) string {
	for k, v := range q {
		if len(v) > 1 {
			return k
		}
	}
	return ""
}

// PublicClientID returns the client_id that a token or revocation request f of a public client
// names ("" when it names none and none is required). A request that authenticates a client (an
// Authorization header or a client_secret) is refused with 401 invalid_client and a Basic
// challenge for realm set on w, which also tells golang.org/x/oauth2's auto-detection to send
// client_id in the body.
func PublicClientID(w http.ResponseWriter, r *http.Request, f url.Values, realm string, required bool) (string, *Error) {
	if r.Header.Get("Authorization") != "" || f.Get("client_secret") != "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+realm+`"`)
		return "", &Error{Status: http.StatusUnauthorized, Code: "invalid_client",
			Description: "Clients of this server are public (token_endpoint_auth_method none): send client_id in the form body, without an Authorization header or client_secret."}
	}
	id := f.Get("client_id")
	if id == "" && required {
		return "", BadRequest("invalid_request", "client_id is required.")
	}
	return id, nil
}

// UnknownClient is the answer to a client_id under which no client is registered.
func UnknownClient() *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "invalid_client", Description: "No client is registered with this client_id."}
}

// CheckGrantType checks a token request's grant_type against the supported ones (GrantTypes and
// extra) and the ones the client registered.
func CheckGrantType(gt string, registered []string, extra ...string) *Error {
	switch {
	case gt == "":
		return BadRequest("invalid_request", "grant_type is required.")
	case !slices.Contains(GrantTypes, gt) && !slices.Contains(extra, gt):
		return BadRequest("unsupported_grant_type", "grant_type must be one of "+strings.Join(append(slices.Clone(GrantTypes), extra...), ", ")+".")
	case !slices.Contains(registered, gt):
		return BadRequest("unauthorized_client", "The client did not register the grant type "+gt+".")
	}
	return nil
}

// CheckResponseType checks an authorization request's response_type: code only.
func CheckResponseType(q url.Values) *Error {
	switch rt := q.Get("response_type"); {
	case rt == "":
		return BadRequest("invalid_request", "response_type is required and must be code.")
	case rt != "code":
		return BadRequest("unsupported_response_type", "Only response_type=code is supported.")
	}
	return nil
}

// CoversScope reports whether granted holds every scope of want.
func CoversScope(granted, want string) bool {
	for _, w := range strings.Fields(want) {
		if !slices.Contains(strings.Fields(granted), w) {
			return false
		}
	}
	return true
}
