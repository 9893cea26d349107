package sandbox_test

import (
	"fmt"
	"io"
	"net/http"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

// Example runs the sandbox in-process and calls it through its RoundTripper, with no listener.
func Example() {
	svc, err := sandbox.New(sandbox.Options{DemoToken: "demo"})
	if err != nil {
		panic(err)
	}
	hc := &http.Client{Transport: svc.RoundTripper()}
	req, _ := http.NewRequest("GET", "https://api.example.com/open/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+svc.DemoToken())
	res, err := hc.Do(req)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.StatusCode, string(body))
	// Output: 200 {"userId":"u_demo","nickname":"Demo Author","scopes":["mcp:card-writer"]}
}
