package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ErrForeignAsset is wrapped by FetchAsset's error for a URL outside the configured origin.
var ErrForeignAsset = errors.New("asset URL is not on the card service's origin")

// fetchAssetOp names FetchAsset in errors and logs; it is no operation of the contract.
const fetchAssetOp = "fetchAsset"

// FetchAsset downloads a file the card service serves, such as the url of an image that
// uploadImage or listCardAssets returned, and returns its bytes and Content-Type. Only URLs on
// the configured origin are fetched (anything else is an error wrapping ErrForeignAsset), through
// the client's transport (so with its token, and in-process for a sandbox), following same-origin
// redirects only, within the client's timeout when ctx has no deadline; a body over maxBytes is an
// error. A non-2xx answer is an *Error. It is retried like a read.
func (c *Client) FetchAsset(ctx context.Context, rawURL string, maxBytes int64) ([]byte, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return nil, "", fmt.Errorf("card service: %s: %q is not an absolute URL", fetchAssetOp, rawURL)
	}
	if u.User != nil {
		return nil, "", fmt.Errorf("card service: %s: the URL carries user information", fetchAssetOp)
	}
	if o := originOf(u); o != c.origin {
		return nil, "", fmt.Errorf("card service: %s: %w (%s, not %s)", fetchAssetOp, ErrForeignAsset, o, c.origin)
	}
	if maxBytes <= 0 {
		maxBytes = c.maxBytes
	}
	if _, has := ctx.Deadline(); !has && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	for attempt := 1; ; attempt++ {
		data, ct, err := c.fetchOnce(ctx, u.String(), maxBytes)
		if err == nil || ctx.Err() != nil || attempt >= c.retry.MaxAttempts {
			return data, ct, err
		}
		retry, _ := retryDecision(err, true)
		if !retry {
			return nil, "", err
		}
		if serr := c.sleep(ctx, c.retry.backoff(attempt)); serr != nil {
			return nil, "", err
		}
	}
}

func (c *Client) fetchOnce(ctx context.Context, target string, maxBytes int64) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, "", fmt.Errorf("card service: %s: build request: %w", fetchAssetOp, err)
	}
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, "", fmt.Errorf("card service: %s: GET %s: %w", fetchAssetOp, redactQuery(target), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		return nil, "", decodeError(fetchAssetOp, resp.StatusCode, resp.Header, body)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("card service: %s: read the answer: %w", fetchAssetOp, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, "", fmt.Errorf("card service: %s: the asset is larger than %d bytes", fetchAssetOp, maxBytes)
	}
	return data, resp.Header.Get("Content-Type"), nil
}

// redactQuery drops a URL's query, which may carry a signature, for messages.
func redactQuery(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		return s[:i]
	}
	return s
}
