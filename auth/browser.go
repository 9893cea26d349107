package auth

import (
	"errors"
	"net/url"
	"os/exec"
	"runtime"
)

// OpenURL opens an http(s) address in the user's browser with the system's opener (xdg-open,
// open, or rundll32's FileProtocolHandler on Windows), started directly, never through a shell,
// so nothing in the address is interpreted. It does not wait for the browser.
func OpenURL(address string) error {
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("only http(s) addresses are opened")
	}
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", address)
	case "darwin":
		cmd = exec.Command("open", address)
	default:
		cmd = exec.Command("xdg-open", address)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reap it
	return nil
}
