package tools

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/internal/quota"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/tavernsync"
	"github.com/cardwriter/cardwriter-mcp/internal/tokens"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// charsPerToken sets an export's cap in characters (UTF-16 code units, as a JavaScript host
// counts them) from the result budget in tokens, never past MaxResultChars (over which Claude
// Code moves a result into a file).
const charsPerToken = 2.5

// DefaultExportTTL is how long a large export stays readable when Options.ExportTTL is 0.
const DefaultExportTTL = time.Hour

// exportKeyPrefix starts the store keys of large exports: "export:" + the export's id, one key
// per export holding its owner, expiry and bytes (exportRecord).
const exportKeyPrefix = "export:"

// ExportKeyPrefix starts the store keys of large exports (for the store's sealing).
const ExportKeyPrefix = exportKeyPrefix

// exportScheme is the URI scheme of large exports: export://ID.
const exportScheme = "export"

// linkProtocol is the first protocol revision with resource_link content.
const linkProtocol = "2025-06-18"

// exportRecord is a large export as the store keeps it.
type exportRecord struct {
	Owner    string    `json:"owner"`
	Name     string    `json:"name"`
	MIMEType string    `json:"mimeType"`
	Text     bool      `json:"text,omitempty"` // the bytes are UTF-8 text (JSON), read back as text, else as a blob
	Data     []byte    `json:"data"`
	Expires  time.Time `json:"expiresAt"`
}

// exportIndexPrefix starts the store key that lists a user's live exports for resources/list:
// "exports-of:" + a digest of the owner, one value holding the links (never the bytes) of the
// newest maxListedExports, pruned of the expired at each export, expiring with the newest.
const exportIndexPrefix = "exports-of:"

// maxListedExports bounds how many of a user's exports resources/list names.
const maxListedExports = 100

// DownloadPath is where the HTTP server serves the download URLs of large exports:
// DownloadPath + ID + "." + signature.
const DownloadPath = "/download/"

// exportLink is the structuredContent.link of an export sent by reference.
type exportLink struct {
	URI       string `json:"uri"`
	Name      string `json:"name"`
	MIMEType  string `json:"mimeType"`
	Size      int    `json:"size"`
	ExpiresAt string `json:"expiresAt"`
	// DownloadURL (HTTP with a public URL) is the file for a browser: signed for its owner,
	// good until ExpiresAt.
	DownloadURL string `json:"downloadUrl,omitempty"`
}

// exports keeps large exports in the store for resources/read, each readable by its owner
// until it expires.
type exports struct {
	kv     store.KV
	quota  *quota.Ledger // each user's live exports, in bytes
	ttl    time.Duration
	now    func() time.Time
	budget int
	client *upstream.Client
	owner  Owner
	log    *slog.Logger
	keys   *signer // signs download URLs
	public string  // the HTTP server's public origin; "": no download URLs
}

// newExports returns the exports of a server with opts, calling the card service through
// client, owned by owner, signing download URLs with keys.
func newExports(opts Options, client *upstream.Client, owner Owner, log *slog.Logger, keys *signer) *exports {
	x := &exports{kv: opts.Exports, ttl: opts.ExportTTL, now: opts.now, budget: opts.resultBudget(), client: client, owner: owner, log: log,
		keys: keys, public: strings.TrimRight(opts.PublicURL, "/")}
	if x.kv == nil {
		x.kv = store.NewMemory()
	}
	if x.ttl <= 0 {
		x.ttl = DefaultExportTTL
	}
	if x.now == nil {
		x.now = time.Now
	}
	limit := opts.ExportUserBytes
	if limit == 0 {
		limit = DefaultExportUserBytes
	}
	x.quota = quota.New(x.kv, "exports", max(limit, 0), "bytes", "--export-user-bytes",
		"Save the links you have (read them with resources/read) and wait for them to expire, or export over stdio to a file (path).")
	x.quota.SetClock(x.now)
	return x
}

// DefaultExportUserBytes is the most bytes one user's live exports hold together when
// Options.ExportUserBytes is 0.
const DefaultExportUserBytes = 64 << 20

// exportOwner is who may read an export back: the call's Owner (the same as its revisions'),
// "" when it has none.
func (x *exports) exportOwner(ctx context.Context) string {
	if x.owner == nil {
		return "" // the download handler: its requests carry a signature, not an owner
	}
	u, err := x.owner(ctx)
	if err != nil {
		return ""
	}
	return u.BaseURL + "\x00" + u.ID
}

// exportDest is the where-to of an export call: path (stdio) and overwrite.
type exportDest struct {
	Path      *string `json:"path"`
	Overwrite bool    `json:"overwrite"`
}

// deliverExport puts an exported file where the call asks: at path (over stdio), inline in
// the result when it fits the result budget (as text, image or embedded resource), else (over
// stdio, with a folder open to the server) in a new file there, else in the store behind a
// resource_link (and over HTTP a download URL). inline names the result's fields that hold the
// file inline (the card or lorebook object, dataBase64), dropped when it goes elsewhere. JSON
// written or linked is laid out in lines, so that hosts' file readers can page it. A file not
// inline leaves the result's JSON in the text too: a host that shows the model only the text
// (Gemini CLI) sees every field.
func deliverExport(ctx context.Context, c *Call, out json.RawMessage, f tavernsync.File, name string, inline ...string) (json.RawMessage, error) {
	var dest exportDest
	if err := json.Unmarshal(c.Body, &dest); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	data, mime, isText, err := fileBytes(f)
	if err != nil {
		return nil, err
	}
	if isText {
		data = inLines(data)
	}
	deliver := func(key string, v any, content ...mcp.Content) (json.RawMessage, error) {
		res, err := replaceFields(out, inline, key, v)
		if err != nil {
			return nil, err
		}
		c.Content = append([]mcp.Content{mcp.NewTextContent(string(res))}, content...)
		return res, nil
	}
	if dest.Path != nil {
		w, err := tavernsync.WriteLocalFile(ctx, tavernEnv(c), *dest.Path, data, dest.Overwrite)
		if err != nil {
			return nil, err
		}
		return deliver("written", w)
	}
	content := fileContent(f)
	if c.Exports.fits(out, content) {
		c.Content = []mcp.Content{content}
		return out, nil
	}
	w, written, err := tavernsync.WriteDefaultFile(ctx, tavernEnv(c), name, data)
	var ask *needInput
	switch {
	case errors.As(err, &ask):
		return nil, err
	case err != nil:
		c.Log.LogAttrs(ctx, slog.LevelWarn, "export not written to the default folder; linked instead", slog.String("err", err.Error()))
	case written:
		return deliver("written", w)
	}
	link, err := c.Exports.keep(ctx, name, mime, isText, data)
	if err != nil {
		return nil, err
	}
	if supportsLinks(ctx) {
		size := int64(link.Size)
		rl := mcp.NewResourceLink(link.URI, link.Name, "The exported file; readable with resources/read by the user who exported it until "+link.ExpiresAt+".", link.MIMEType)
		rl.Size = &size
		return deliver("link", link, rl)
	}
	return deliver("link", link)
}

// inLines returns JSON laid out one member or element per line (two-space indent), so that a
// host's file reader can page it; anything else as it is.
func inLines(data []byte) []byte {
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		return data
	}
	return buf.Bytes()
}

// supportsLinks reports whether the call's protocol revision has resource_link content.
func supportsLinks(ctx context.Context) bool {
	v := server.RequestProtocolVersion(ctx)
	return v != "" && v >= linkProtocol
}

// fileBytes returns an exported file's bytes, type, and whether it is text.
func fileBytes(f tavernsync.File) ([]byte, string, bool, error) {
	if f.DataBase64 == "" {
		return []byte(f.Text), jsonMIME, true, nil
	}
	data, err := base64.StdEncoding.DecodeString(f.DataBase64)
	if err != nil {
		return nil, "", false, fmt.Errorf("decode the exported file: %w", err)
	}
	return data, f.MIMEType, false, nil
}

// replaceFields returns out without the fields drop and with key set to v.
func replaceFields(out json.RawMessage, drop []string, key string, v any) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("decode the export result: %w", err)
	}
	for _, k := range drop {
		delete(m, k)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m[key] = raw
	return json.Marshal(m)
}

// fits reports whether a result of out with content (after the one-line summary) stays within
// the budget: its text and its structuredContent each at most the budget in cl100k tokens and
// charsPerToken times as many characters.
func (x *exports) fits(out json.RawMessage, content mcp.Content) bool {
	text := ""
	switch c := content.(type) {
	case mcp.TextContent:
		text = c.Text
	case mcp.EmbeddedResource:
		if b, ok := c.Resource.(mcp.BlobResourceContents); ok {
			text = b.Blob
		}
	}
	limit := charsPerToken * float64(x.budget)
	if x.budget <= MaxResultBudget { // not the export commands', which keep every file inline
		limit = min(limit, MaxResultChars)
	}
	for _, s := range []string{text, string(out)} {
		if float64(utf16Len(s)) > limit {
			return false
		}
	}
	for _, s := range []string{text, string(out)} {
		if len(s) <= x.budget {
			continue // a token is at least one byte
		}
		if ok, err := tokens.Within(s, x.budget); err != nil || !ok {
			return false
		}
	}
	return true
}

// utf16Len is the length of s in UTF-16 code units, as JavaScript counts a string's characters.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += max(utf16.RuneLen(r), 1) // an invalid rune is one replacement character
	}
	return n
}

// keep stores a file for its owner until the TTL passes and returns its link.
func (x *exports) keep(ctx context.Context, name, mime string, isText bool, data []byte) (exportLink, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return exportLink{}, err
	}
	key := hex.EncodeToString(id[:])
	expires := x.now().Add(x.ttl).UTC().Truncate(time.Second)
	owner := x.exportOwner(ctx)
	if owner == "" {
		return exportLink{}, errNoOwner
	}
	if _, err := x.quota.Reserve(ctx, owner, key, int64(len(data)), expires); err != nil {
		return exportLink{}, err // a *quota.ExceededError becomes quota_exceeded (outcome)
	}
	rec := exportRecord{Owner: owner, Name: name, MIMEType: mime, Text: isText, Data: data, Expires: expires}
	raw, err := json.Marshal(rec)
	if err != nil {
		return exportLink{}, err
	}
	if err := x.kv.Set(ctx, exportKeyPrefix+key, raw, x.ttl); err != nil {
		return exportLink{}, fmt.Errorf("keep the export for resources/read: %w", err)
	}
	link := exportLink{URI: exportScheme + "://" + key, Name: name, MIMEType: mime, Size: len(data), ExpiresAt: expires.Format(time.RFC3339)}
	if x.public != "" {
		sig, err := x.downloadSig(ctx, key, rec)
		if err != nil {
			return exportLink{}, err
		}
		link.DownloadURL = x.public + DownloadPath + key + "." + sig
	}
	if _, err := x.kv.Update(ctx, exportIndexPrefix+ownerDigest(owner), x.ttl, func(old []byte) ([]byte, error) {
		links := x.liveOf(old)
		links = append(links, link)
		if len(links) > maxListedExports {
			links = links[len(links)-maxListedExports:]
		}
		return json.Marshal(links)
	}); err != nil {
		return exportLink{}, fmt.Errorf("list the export for resources/list: %w", err)
	}
	return link, nil
}

// liveOf returns the links of an index value that have not expired, oldest first.
func (x *exports) liveOf(raw []byte) []exportLink {
	var links []exportLink
	if len(raw) == 0 || json.Unmarshal(raw, &links) != nil {
		return nil
	}
	now := x.now()
	return slices.DeleteFunc(links, func(l exportLink) bool {
		exp, err := time.Parse(time.RFC3339, l.ExpiresAt)
		return err != nil || !now.Before(exp)
	})
}

// ownerDigest names an owner in a store key: hex, whatever the owner's id holds.
func ownerDigest(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:12])
}

// downloadSig signs an export's download URL: its id, owner and expiry.
func (x *exports) downloadSig(ctx context.Context, id string, rec exportRecord) (string, error) {
	key, err := x.keys.secret(ctx)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "download\x00%s\x00%s\x00%d", id, rec.Owner, rec.Expires.Unix())
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18]), nil
}

// live returns the links of the caller's exports that have not expired, newest first.
func (x *exports) live(ctx context.Context) ([]exportLink, error) {
	owner := x.exportOwner(ctx)
	if owner == "" {
		return nil, nil
	}
	raw, err := x.kv.Get(ctx, exportIndexPrefix+ownerDigest(owner))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list the exports: %w", err)
	}
	links := x.liveOf(raw)
	slices.Reverse(links)
	return links, nil
}

// errNoExport is why an export cannot be read: one answer whether it never existed, expired or
// belongs to another user, so that a read tells nothing of other users' exports.
var errNoExport = errors.New("no export of yours at this URI: it expired, or it was never made for you; export the card or worldbook again")

// read returns the export at uri when the caller made it and it has not expired.
func (x *exports) read(ctx context.Context, uri string) (exportRecord, error) {
	id, ok := strings.CutPrefix(uri, exportScheme+"://")
	if !ok || id == "" || strings.ContainsAny(id, "/?#") {
		return exportRecord{}, errNoExport
	}
	raw, err := x.kv.Get(ctx, exportKeyPrefix+id)
	if errors.Is(err, store.ErrNotFound) {
		return exportRecord{}, errNoExport
	}
	if err != nil {
		return exportRecord{}, fmt.Errorf("read the export: %w", err)
	}
	var rec exportRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return exportRecord{}, fmt.Errorf("the export %s is damaged: %w", id, err)
	}
	if owner := x.exportOwner(ctx); !x.now().Before(rec.Expires) || owner == "" || rec.Owner != owner {
		return exportRecord{}, errNoExport
	}
	return rec, nil
}

// addExportResources registers the export://{exportId} template, whose reads go to x, read
// first in a hook (readFirst), so that a read of an export the caller may not have is the
// protocol's "resource not found"; resources/list names the caller's live exports (Gemini
// CLI's reader finds only listed URIs).
func addExportResources(srv *server.MCPServer, hooks *server.Hooks, x *exports) {
	hooks.AddAfterListResources(func(ctx context.Context, _ any, req *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
		if req.Params.Cursor != "" || res == nil {
			return
		}
		links, err := x.live(ctx)
		if err != nil {
			x.log.LogAttrs(ctx, slog.LevelWarn, "exports not listed", slog.String("err", err.Error()))
			return
		}
		for _, l := range links {
			r := mcp.NewResource(l.URI, l.Name, mcp.WithMIMEType(l.MIMEType),
				mcp.WithResourceDescription("A file you exported; readable until "+l.ExpiresAt+"."))
			size := int64(l.Size)
			r.Size = &size
			res.Resources = append(res.Resources, r)
		}
	})
	tmpl := mcp.NewResourceTemplate(exportScheme+"://{exportId}", "export",
		mcp.WithTemplateTitle("Exported file"),
		mcp.WithTemplateDescription("A file export_tavern_card or export_tavern_worldbook returned by link because it was too large to return inline; readable by the user who exported it until it expires."))
	read := func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		uri := req.Params.URI
		rec, err := x.read(ctx, uri)
		if errors.Is(err, errNoExport) {
			return nil, &ResourceNotFoundError{URI: uri, Message: err.Error()}
		}
		if err != nil {
			x.log.LogAttrs(ctx, slog.LevelError, "resource read failed", slog.String("resource", "export"), slog.String("err", err.Error()))
			return nil, errors.New("reading the export failed; details are in the server log")
		}
		if rec.Text {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: rec.MIMEType, Text: string(rec.Data)}}, nil
		}
		return []mcp.ResourceContents{mcp.BlobResourceContents{URI: uri, MIMEType: rec.MIMEType, Blob: base64.StdEncoding.EncodeToString(rec.Data)}}, nil
	}
	srv.AddResourceTemplate(tmpl, stashedOr(read))
	readFirst(hooks, exportScheme, read)
}
