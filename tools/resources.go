package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

const jsonMIME = "application/json"

// resourceTemplate is one resource template: URIs scheme://{param}, read with read.
type resourceTemplate struct {
	scheme, param, name, title, description string
	read                                    func(ctx context.Context, c *upstream.Client, id string) (any, error)
}

var resourceTemplates = []resourceTemplate{
	{
		scheme: "card", param: "roleId", name: "card", title: "Card",
		description: "A card's full detail as get_card returns it (JSON).",
		read: func(ctx context.Context, c *upstream.Client, id string) (any, error) {
			var out json.RawMessage
			err := c.Call(ctx, "getCard", map[string]string{"roleId": id}, nil, &out)
			return out, err
		},
	},
	{
		scheme: "worldbook", param: "worldbookId", name: "worldbook", title: "Worldbook",
		description: "A worldbook's metadata and all its entries, as one JSON object {worldbook, entries}.",
		read: func(ctx context.Context, c *upstream.Client, id string) (any, error) {
			var detail, entries json.RawMessage
			if err := c.Call(ctx, "getWorldbook", map[string]string{"worldbookId": id}, nil, &detail); err != nil {
				return nil, err
			}
			if err := c.Call(ctx, "listWorldbookEntries", map[string]string{"worldbookId": id}, nil, &entries); err != nil {
				return nil, err
			}
			var list struct {
				Entries json.RawMessage `json:"entries"`
			}
			if err := json.Unmarshal(entries, &list); err != nil {
				return nil, fmt.Errorf("decode the entries of worldbook %s: %w", id, err)
			}
			if list.Entries == nil {
				list.Entries = json.RawMessage(`[]`)
			}
			return map[string]json.RawMessage{"worldbook": detail, "entries": list.Entries}, nil
		},
	},
	{
		scheme: "trial", param: "clientKey", name: "trial", title: "Trial card",
		description: "A trial card's summary as get_trial_card returns it (JSON).",
		read: func(ctx context.Context, c *upstream.Client, id string) (any, error) {
			var out json.RawMessage
			err := c.Call(ctx, "getTrialCard", map[string]string{"clientKey": id}, nil, &out)
			return out, err
		},
	},
}

// ResourceNotFoundError is the error of a resource read whose card, worldbook or trial does not
// exist; its text is the card service's message.
//
// mcp-go v1.2.1 answers every error of a resource template handler with JSON-RPC -32603 and the
// error's text as the message (server/handler_errors.go); it keeps -32002 for URIs no template
// matches. The error wraps server.ErrResourceNotFound so that a later mcp-go which maps it can
// answer -32002 without a change here.
type ResourceNotFoundError struct {
	URI     string
	Message string
}

func (e *ResourceNotFoundError) Error() string { return "resource not found: " + e.Message }

// Unwrap makes errors.Is(err, server.ErrResourceNotFound) true.
func (e *ResourceNotFoundError) Unwrap() error { return server.ErrResourceNotFound }

// addResources registers the resource templates, read in a hook (readFirst) so that a card,
// worldbook or trial that does not exist is the protocol's "resource not found".
func addResources(srv *server.MCPServer, hooks *server.Hooks, client *upstream.Client, log *slog.Logger) {
	for _, rt := range resourceTemplates {
		tmpl := mcp.NewResourceTemplate(rt.scheme+"://{"+rt.param+"}", rt.name,
			mcp.WithTemplateTitle(rt.title),
			mcp.WithTemplateDescription(rt.description),
			mcp.WithTemplateMIMEType(jsonMIME))
		read := rt.handler(client, log)
		srv.AddResourceTemplate(tmpl, stashedOr(read))
		readFirst(hooks, rt.scheme, read)
	}
}

// readStash is what a before-read hook read, left in the request's _meta for the handler
// (mcp-go hands the handler the request as the hook left it); a client cannot send one, the
// type is this package's.
type readStash struct{ contents []mcp.ResourceContents }

// readStashKey is the _meta field of a readStash.
const readStashKey = "io.cardwriter/read"

// readFirst reads the resources of scheme in a before-read hook, so that what does not exist
// (or may not be read) is the protocol's "resource not found" (-32002, or -32602 under
// 2026-07-28): mcp-go v1.2.1 answers every error of a template handler with -32603, but a URI
// no template matches with that code, so the hook rewrites such a URI into one no template
// matches and that says why. What it read is left for the handler (stashedOr): one read, one
// answer, even when the object goes or a link expires in between.
func readFirst(hooks *server.Hooks, scheme string, read server.ResourceTemplateHandlerFunc) {
	hooks.AddBeforeReadResource(func(ctx context.Context, _ any, req *mcp.ReadResourceRequest) {
		uri := req.Params.URI
		if !strings.HasPrefix(uri, scheme+"://") {
			return
		}
		if req.Params.Meta != nil {
			delete(req.Params.Meta.AdditionalFields, readStashKey)
		}
		contents, err := read(ctx, *req)
		var nf *ResourceNotFoundError
		switch {
		case errors.As(err, &nf):
			req.Params.URI = uri + " (" + nf.Message + ")"
		case err == nil:
			if req.Params.Meta == nil {
				req.Params.Meta = &mcp.Meta{}
			}
			if req.Params.Meta.AdditionalFields == nil {
				req.Params.Meta.AdditionalFields = map[string]any{}
			}
			req.Params.Meta.AdditionalFields[readStashKey] = readStash{contents}
		}
		// Another error: the handler reads again and answers it.
	})
}

// stashedOr answers with what readFirst read, else by reading.
func stashedOr(read server.ResourceTemplateHandlerFunc) server.ResourceTemplateHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		if req.Params.Meta != nil {
			if st, ok := req.Params.Meta.AdditionalFields[readStashKey].(readStash); ok {
				return st.contents, nil
			}
		}
		return read(ctx, req)
	}
}

func (rt resourceTemplate) handler(client *upstream.Client, log *slog.Logger) server.ResourceTemplateHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		uri := req.Params.URI
		id, err := rt.id(uri)
		if err != nil {
			return nil, err
		}
		v, err := rt.read(ctx, client, id)
		if err != nil {
			var apiErr *upstream.Error
			var argErr *upstream.ArgumentError
			switch {
			case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound:
				return nil, &ResourceNotFoundError{URI: uri, Message: apiErr.Message}
			case errors.As(err, &apiErr):
				return nil, errors.New(apiErr.Message)
			case errors.As(err, &argErr):
				return nil, &ResourceNotFoundError{URI: uri, Message: fmt.Sprintf("%s is not a valid %s: %s.", uri, rt.param, argErr.Reason)}
			}
			log.LogAttrs(ctx, slog.LevelError, "resource read failed", slog.String("resource", rt.name), slog.String("err", err.Error()))
			return nil, fmt.Errorf("reading %s failed; details are in the server log", rt.name)
		}
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", rt.name, err)
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: jsonMIME, Text: string(data)}}, nil
	}
}

// id extracts the template's parameter from a URI scheme://ID (percent-decoded).
func (rt resourceTemplate) id(uri string) (string, error) {
	rest, ok := strings.CutPrefix(uri, rt.scheme+"://")
	if !ok || rest == "" {
		return "", &ResourceNotFoundError{URI: uri, Message: fmt.Sprintf("%s does not name a %s.", uri, rt.name)}
	}
	id, err := url.PathUnescape(rest)
	if err != nil {
		return "", &ResourceNotFoundError{URI: uri, Message: fmt.Sprintf("%s is not a valid %s URI.", uri, rt.name)}
	}
	return id, nil
}
