package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// accountFlags are the flags of login, logout and whoami.
type accountFlags struct {
	apiHost   string
	configDir string
	logFlags
}

func (f *accountFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.apiHost, "api-host", "", "the card service's address, e.g. https://api.example.com (the API is under /open/v1)")
	fs.StringVar(&f.configDir, "config-dir", "", "directory of the saved sign-ins (default: the user config directory's cardwriter-mcp)")
	f.logFlags.register(fs)
	// These commands talk to a person: only warnings and errors are logged unless asked.
	if lf := fs.Lookup("log-level"); lf != nil {
		lf.DefValue = "warn"
		_ = lf.Value.Set("warn")
	}
}

// store opens the sign-in store of --config-dir (or CARDWRITER_CONFIG_DIR, or the default).
func (f *accountFlags) store() (*auth.Store, error) {
	return auth.NewStore(f.configDir)
}

// savedAPIHost returns --api-host, or the only API host with a saved sign-in when it is not set.
func (f *accountFlags) savedAPIHost(store *auth.Store) (string, error) {
	if f.apiHost != "" {
		return f.apiHost, nil
	}
	d, err := store.Load()
	if err != nil {
		return "", err
	}
	var hosts []string
	for _, g := range d.Grants {
		h := strings.TrimSuffix(g.Resource, "/open/v1")
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	switch len(hosts) {
	case 0:
		return "", errNoSavedHost
	case 1:
		return hosts[0], nil
	}
	slices.Sort(hosts)
	return "", fmt.Errorf("signed in to several card services (%s): choose one with --api-host", strings.Join(hosts, ", "))
}

// errNoSavedHost reports that no --api-host was given and no sign-in was saved to choose one.
var errNoSavedHost = errors.New("not signed in: run `cardwriter-mcp login --api-host URL` first")

// savedSignIn parses the flags of a command about a saved sign-in (logout, whoami) and returns
// its logger, the sign-in store and the API host: --api-host, or the only one signed in to. An
// answered --help comes back as errHelp.
func savedSignIn(name string, args []string, stdout, stderr io.Writer) (*slog.Logger, *auth.Store, string, error) {
	fs := newFlagSet(name, name+" [--api-host URL]", stdout, stderr)
	var f accountFlags
	f.register(fs)
	if err := parseFlags(fs, args, nil); err != nil {
		return nil, nil, "", err
	}
	logger, err := f.logger(stderr)
	if err != nil {
		return nil, nil, "", err
	}
	store, err := f.store()
	if err != nil {
		return nil, nil, "", err
	}
	apiHost, err := f.savedAPIHost(store)
	if err != nil {
		return nil, nil, "", err
	}
	return logger, store, apiHost, nil
}

func runLogin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("login", "login --api-host URL [--no-browser | --device] [--timeout 5m]", stdout, stderr)
	var f accountFlags
	f.register(fs)
	noBrowser := fs.Bool("no-browser", false, "print the sign-in address without opening a browser; a browser on another machine ends on a page that does not load, whose address you paste back here (over SSH, say)")
	device := fs.Bool("device", false, "sign in with a code typed in a browser on any device (the RFC 8628 device grant, where the card service offers it); nothing listens on this machine")
	timeout := fs.Duration("timeout", auth.DefaultLoginTimeout, "how long to wait for the sign-in to finish in the browser")
	if err := parseFlags(fs, args, nil); err != nil {
		return helpOK(err)
	}
	if f.apiHost == "" {
		return errors.New("set --api-host (or CARDWRITER_API_HOST) to the card service's address, e.g. https://api.example.com")
	}
	if _, err := auth.Resource(f.apiHost); err != nil {
		return fmt.Errorf("--api-host: %w", err)
	}
	if *timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", *timeout)
	}
	logger, err := f.logger(stderr)
	if err != nil {
		return err
	}
	store, err := f.store()
	if err != nil {
		return err
	}
	opts := auth.LoginOptions{
		APIHost: f.apiHost, Store: store, Logger: logger, Timeout: *timeout, Out: stderr,
	}
	switch {
	case *device:
		opts.Device = true
	case *noBrowser:
		opts.Paste = os.Stdin
	default:
		opts.OpenBrowser = auth.OpenURL
	}
	g, err := auth.Login(ctx, opts)
	if err != nil {
		return unreachable(f.apiHost, err)
	}
	fmt.Fprintf(stdout, "Signed in to %s.\n", strings.TrimSuffix(g.Resource, "/open/v1"))
	if me, _, err := whoamiCall(ctx, store, f.apiHost, logger); err == nil {
		fmt.Fprintf(stdout, "User: %s (%s)\n", me.Nickname, me.UserID)
	} else {
		fmt.Fprintf(stderr, "The sign-in was saved, but the card service did not say who is signed in: %v\n", err)
	}
	fmt.Fprintf(stdout, "Sign-in saved in %s.\n", store.Path())
	if os.Getenv("CARDWRITER_TOKEN") != "" {
		fmt.Fprintln(stderr, "Note: CARDWRITER_TOKEN is set; `cardwriter-mcp stdio` uses it instead of this sign-in.")
	}
	return nil
}

// whoamiCall asks the card service who the saved sign-in for apiHost belongs to (refreshing
// the access token when needed), and returns the source that holds the grant now.
func whoamiCall(ctx context.Context, store *auth.Store, apiHost string, logger *slog.Logger) (*upstream.Me, *auth.Source, error) {
	src, err := auth.NewSource(store, apiHost, auth.SourceOptions{Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	client, err := upstream.New(apiHost, src, upstream.WithUserAgent(userAgent()), upstream.WithLogger(logger))
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	me, err := client.GetMe(ctx)
	return me, src, err
}
