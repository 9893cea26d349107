package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// doctorCheck is one line of `cardwriter-mcp doctor`: what was checked, and what to fix.
type doctorCheck struct {
	name, result, fix string
	ok                bool
}

// runDoctor checks a user's setup in one go and says what to fix: the config directory, the
// saved sign-in and its expiry, the card service reachable, the token accepted, a --contract
// file, or the sandbox with --sandbox; with --public-url, the HTTP server's state key. It
// exits 1 when a check fails.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("doctor", "doctor [--api-host URL | --sandbox] [--contract FILE]", stdout, stderr, envToken, envConfigDir)
	var f serverFlags
	serviceFlags(fs, &f, "with --sandbox: file of the sandbox's state to check (default: memory only)") // the setup of the person who runs it: their saved sign-in
	var af httpAuthFlags                                                                                // the HTTP server's state key, checked when --public-url is given
	af.registerKeys(fs)
	if err := parseFlags(fs, args, nil); err != nil {
		return helpOK(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var checks []doctorCheck
	add := func(c doctorCheck) { checks = append(checks, c) }
	quiet := slog.New(slog.DiscardHandler)

	if dir, err := auth.Dir(); err != nil {
		add(doctorCheck{name: "config directory", result: err.Error(), fix: "set CARDWRITER_CONFIG_DIR to a writable folder"})
	} else if err := probeDir(dir); err != nil {
		add(doctorCheck{name: "config directory", result: fmt.Sprintf("%s takes no writes: %v", dir, err), fix: "make it writable, or set CARDWRITER_CONFIG_DIR"})
	} else {
		add(doctorCheck{name: "config directory", result: dir, ok: true})
	}
	if c, ok := af.keyCheck(); ok {
		add(c)
	}
	if f.contract != "" {
		if table, err := loadContract(f.contract); err != nil {
			add(doctorCheck{name: "contract", result: err.Error(), fix: "correct the file (see docs/contract.md)"})
		} else {
			result := f.contract + " applies"
			if w := table.Warnings(); len(w) > 0 {
				result += "; " + strings.Join(w, "; ")
			}
			add(doctorCheck{name: "contract", result: result, ok: true})
		}
	}
	switch {
	case f.sandbox:
		f.contract = ""
	case f.apiHost == "":
		add(doctorCheck{name: "card service", result: "no --api-host (or CARDWRITER_API_HOST)", fix: "give the card service's address, or use --sandbox to try it offline"})
		return printDoctor(stdout, checks)
	default:
		if _, err := auth.Resource(f.apiHost); err != nil && !strings.Contains(err.Error(), "no path") {
			add(doctorCheck{name: "card service", result: strings.TrimPrefix(err.Error(), "upstream: "),
				fix: "use --api-host " + upstream.SuggestAPIHost(f.apiHost)})
			return printDoctor(stdout, checks)
		}
		if origin, ok := serviceOrigin(f.apiHost); !ok {
			add(doctorCheck{name: "card service", result: f.apiHost + " is not an origin (scheme://host[:port]); the API's /open/v1 is added for you",
				fix: "use --api-host " + origin})
			return printDoctor(stdout, checks)
		}
		if c := reachable(ctx, f.apiHost); !c.ok {
			add(c)
			return printDoctor(stdout, checks) // the sign-in and the token cannot be tried
		} else {
			add(c)
		}
		if os.Getenv("CARDWRITER_TOKEN") != "" {
			add(doctorCheck{name: "sign-in", result: "CARDWRITER_TOKEN is set; it is used instead of a saved sign-in", ok: true})
		} else if c := savedSignInCheck(ctx, f.apiHost); !c.ok {
			add(c)
			return printDoctor(stdout, checks) // no token to try
		} else {
			add(c)
		}
	}
	client, _, err := f.newClient(quiet, "")
	if err != nil {
		add(doctorCheck{name: "token", result: err.Error(), fix: "run `cardwriter-mcp login --api-host " + f.apiHost + "`"})
		return printDoctor(stdout, checks)
	}
	name := "token"
	if f.sandbox {
		name = "sandbox"
	}
	me, err := client.GetMe(ctx)
	var apiErr *upstream.Error
	status := 0
	switch {
	case err == nil:
		status = http.StatusOK
	case errors.As(err, &apiErr):
		status = apiErr.Status
	}
	_, profile := stdioRevisions(io.Discard)
	if f.sandbox {
		profile = "the sandbox's own"
	}
	switch {
	case err == nil:
		add(doctorCheck{name: name, result: fmt.Sprintf("accepted: signed in as %s (%s)", me.Nickname, me.UserID), ok: true})
	case errors.As(err, &apiErr) && (apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusMethodNotAllowed):
		add(doctorCheck{name: name, result: "not checked: the identity operation is missing here; the first call checks it", ok: true})
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized:
		fix := "run `cardwriter-mcp login --api-host " + f.apiHost + "` (or set a valid CARDWRITER_TOKEN)"
		if os.Getenv("CARDWRITER_TOKEN") != "" {
			fix = "unset CARDWRITER_TOKEN (then the saved sign-in is used), or set it to a valid access token"
		}
		add(doctorCheck{name: name, result: "refused: " + apiErr.Message, fix: fix})
	default:
		add(doctorCheck{name: name, result: "no answer: " + err.Error(), fix: "check the address and your network; `cardwriter-mcp probe` shows more"})
	}
	add(doctorCheck{name: "identity", result: identitySource(client.Contract(), status, profile), ok: true})
	return printDoctor(stdout, checks)
}

// reachable checks that the card service answers at all (a 401 without a token is an answer).
func reachable(ctx context.Context, apiHost string) doctorCheck {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiHost+"/open/v1/me", nil)
	if err != nil {
		return doctorCheck{name: "card service", result: err.Error(), fix: "give --api-host as scheme://host[:port]"}
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return doctorCheck{name: "card service", result: unreachable(apiHost, err).Error(), fix: "check the address (scheme, host and port), and that this machine reaches it"}
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden || resp.StatusCode/100 == 2:
		return doctorCheck{name: "card service", result: fmt.Sprintf("%s answers (%d without a token)", apiHost, resp.StatusCode), ok: true}
	case resp.StatusCode == http.StatusNotFound:
		return doctorCheck{name: "card service", result: fmt.Sprintf("%s answers 404 at /open/v1/me: no card service API there", apiHost),
			fix: "check the address: --api-host is the origin the card service's API lives under (/open/v1)"}
	}
	return doctorCheck{name: "card service", result: fmt.Sprintf("%s answers %d at /open/v1/me (want 401 without a token)", apiHost, resp.StatusCode),
		fix: "check the address; if it is right, the card service has a problem: try again later"}
}

// serviceOrigin returns the origin of an --api-host value, and whether the value is that
// origin (a path such as /open/v1 is a likely mistake: the client adds it).
func serviceOrigin(apiHost string) (string, bool) {
	u, err := url.Parse(apiHost)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return apiHost, true // reachable says what is wrong with it
	}
	origin := u.Scheme + "://" + u.Host
	return origin, strings.TrimSuffix(apiHost, "/") == origin
}

// savedSignInCheck reports the saved sign-in of apiHost and when its access token expires.
func savedSignInCheck(ctx context.Context, apiHost string) doctorCheck {
	store, err := auth.NewStore("")
	if err != nil {
		return doctorCheck{name: "sign-in", result: err.Error(), fix: "set CARDWRITER_CONFIG_DIR to a writable folder"}
	}
	src, err := auth.NewSource(store, apiHost, auth.SourceOptions{})
	if errors.Is(err, auth.ErrNotSignedIn) {
		return doctorCheck{name: "sign-in", result: "not signed in to " + apiHost, fix: "run `cardwriter-mcp login --api-host " + apiHost + "`"}
	}
	if err != nil {
		return doctorCheck{name: "sign-in", result: err.Error(), fix: "run `cardwriter-mcp login --api-host " + apiHost + "` again"}
	}
	g, err := src.Grant(ctx)
	if err != nil {
		return doctorCheck{name: "sign-in", result: err.Error(), fix: "run `cardwriter-mcp login --api-host " + apiHost + "` again"}
	}
	switch {
	case g.Expiry.IsZero():
		return doctorCheck{name: "sign-in", result: "saved; the access token's expiry is not known", ok: true}
	case time.Until(g.Expiry) > 0:
		return doctorCheck{name: "sign-in", result: fmt.Sprintf("saved; the access token expires in %s", time.Until(g.Expiry).Round(time.Second)), ok: true}
	case g.RefreshToken != "":
		return doctorCheck{name: "sign-in", result: "saved; the access token expired and will be refreshed", ok: true}
	}
	return doctorCheck{name: "sign-in", result: "the access token expired and cannot be refreshed", fix: "run `cardwriter-mcp login --api-host " + apiHost + "`"}
}

func printDoctor(w io.Writer, checks []doctorCheck) error {
	failed := 0
	for _, c := range checks {
		mark := "ok  "
		if !c.ok {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(w, "%s %-16s %s\n", mark, c.name, c.result)
		if !c.ok && c.fix != "" {
			fmt.Fprintf(w, "     %-16s fix: %s\n", "", c.fix)
		}
	}
	if failed > 0 {
		fmt.Fprintf(w, "%d check(s) failed.\n", failed)
		return exitCode(1)
	}
	fmt.Fprintln(w, "All checks passed.")
	return nil
}

// probeDir writes and removes a file in dir.
func probeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".ready-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(filepath.Clean(name))
}
