package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/tasks"
)

// taskTools are the tools whose calls run as tasks for a client that declares the Tasks
// extension: the large imports and exports.
var taskTools = []string{"import_tavern_card", "import_tavern_worldbook", "export_tavern_card", "export_tavern_worldbook"}

// taskTTL is how long a task is kept; taskPoll the polling interval suggested.
const (
	taskTTL  = time.Hour
	taskPoll = time.Second
)

// taskRunLimit bounds how long a task's call runs.
const taskRunLimit = 30 * time.Minute

// tasksHTTP serves the Tasks extension over HTTP, in front of mcp-go (which has no 2026-07-28
// tasks). A 2026-07-28 tools/call of one of taskTools whose client capabilities declare the
// extension is recorded as a working task in the store and answered at once with the task
// (resultType "task"); the call itself is then served by next, detached from the connection,
// and its JSON-RPC result or error recorded in the task. tasks/get, tasks/cancel and
// tasks/update are answered from the store, so any replica answers them, for the caller's own
// tasks only.
func tasksHTTP(ts *tasks.Store, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := r.Header.Get(mcp.HeaderMethod)
		if r.Method != http.MethodPost || !mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) ||
			!(method == "tools/call" && slices.Contains(taskTools, r.Header.Get(mcp.HeaderName)) || strings.HasPrefix(method, "tasks/")) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := readAll(r)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Name   string `json:"name"`
				TaskID string `json:"taskId"`
				Meta   struct {
					Version      string `json:"io.modelcontextprotocol/protocolVersion"`
					Capabilities struct {
						Extensions map[string]json.RawMessage `json:"extensions"`
					} `json:"io.modelcontextprotocol/clientCapabilities"`
				} `json:"_meta"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		_, declared := msg.Params.Meta.Capabilities.Extensions[tasks.Extension]
		// What the headers say must be what the body says (else mcp-go answers the mismatch).
		name := msg.Params.Name
		if method != "tools/call" {
			name = msg.Params.TaskID
		}
		agrees := msg.Params.Meta.Version == r.Header.Get(mcp.HeaderProtocolVersion) && name == r.Header.Get(mcp.HeaderName)
		if len(msg.ID) == 0 || !agrees || method == "tools/call" && !declared {
			r.Body = bodyOf(body)
			next.ServeHTTP(w, r)
			return
		}
		owner := requestUser(r)
		switch method {
		case "tools/call":
			task, err := ts.Create(r.Context(), owner, "Running "+r.Header.Get(mcp.HeaderName)+".")
			if err != nil {
				writeRPC(w, msg.ID, nil, rpcError(mcp.INTERNAL_ERROR, "The task could not be recorded: "+err.Error()))
				return
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), taskRunLimit)
			run := r.Clone(ctx)
			run.Body = bodyOf(body)
			go func() {
				defer cancel()
				result, rpcErr := serveCall(next, run)
				_ = ts.Finish(ctx, task.TaskID, result, rpcErr)
			}()
			writeRPC(w, msg.ID, taskResult("task", task), nil)
		case "tasks/get":
			task, err := ts.Get(r.Context(), owner, msg.Params.TaskID)
			if err != nil {
				writeTaskError(w, msg.ID, err)
				return
			}
			writeRPC(w, msg.ID, taskResult("complete", task), nil)
		case "tasks/cancel":
			err := ts.Cancel(r.Context(), owner, msg.Params.TaskID,
				"Cancelled. The work itself may still finish: calling the tool again with the same idempotencyKey returns its result and never makes a second copy.")
			if err != nil {
				writeTaskError(w, msg.ID, err)
				return
			}
			writeRPC(w, msg.ID, map[string]any{"resultType": "complete"}, nil)
		case "tasks/update":
			if _, err := ts.Get(r.Context(), owner, msg.Params.TaskID); err != nil {
				writeTaskError(w, msg.ID, err)
				return
			}
			writeRPC(w, msg.ID, nil, rpcError(mcp.INVALID_PARAMS, "This task asks for no input."))
		default:
			writeRPC(w, msg.ID, nil, rpcError(mcp.METHOD_NOT_FOUND, "Method not found: "+method))
		}
	})
}

// taskResult is a task as a result with resultType.
func taskResult(resultType string, t tasks.Task) map[string]any {
	data, _ := json.Marshal(t) // strings, numbers and JSON: cannot fail
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	out["resultType"] = resultType
	return out
}

// rpcError is a JSON-RPC error object.
func rpcError(code int, message string) map[string]any {
	return map[string]any{"code": code, "message": message}
}

// writeTaskError answers a tasks/* request about a task that is not the caller's or does not
// exist (Invalid params, 400), or one the store failed on.
func writeTaskError(w http.ResponseWriter, id json.RawMessage, err error) {
	if errors.Is(err, tasks.ErrUnknown) {
		writeRPC(w, id, nil, rpcError(mcp.INVALID_PARAMS, err.Error()))
		return
	}
	writeRPC(w, id, nil, rpcError(mcp.INTERNAL_ERROR, "The task could not be read: "+err.Error()))
}

// writeRPC writes a JSON-RPC response; an error's HTTP status is the one 2026-07-28 gives it.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result, rpcErr map[string]any) {
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	status := http.StatusOK
	if rpcErr != nil {
		resp["error"] = rpcErr
		switch rpcErr["code"] {
		case mcp.INVALID_PARAMS:
			status = http.StatusBadRequest
		case mcp.METHOD_NOT_FOUND:
			status = http.StatusNotFound
		}
	} else {
		resp["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp)
}

// serveCall serves a request with next into memory and returns its JSON-RPC result or error
// (the last response of an SSE stream, or the JSON body).
func serveCall(next http.Handler, r *http.Request) (result, rpcErr json.RawMessage) {
	rec := &memoryResponse{header: http.Header{}}
	next.ServeHTTP(rec, r)
	payload := rec.body.Bytes()
	if strings.HasPrefix(rec.header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(payload))
		sc.Buffer(make([]byte, 1<<20), len(payload)+1)
		for sc.Scan() {
			if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok && bytes.Contains(data, []byte(`"id"`)) {
				payload = bytes.Clone(bytes.TrimSpace(data))
			}
		}
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(payload, &resp); err != nil || resp.Result == nil && resp.Error == nil {
		data, _ := json.Marshal(rpcError(mcp.INTERNAL_ERROR, "The call ended without an answer."))
		return nil, data
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp.Result, nil
}

// memoryResponse is a response written to memory (no streaming: mcp-go answers in one body).
type memoryResponse struct {
	header http.Header
	body   bytes.Buffer
	status int
}

func (m *memoryResponse) Header() http.Header         { return m.header }
func (m *memoryResponse) Write(p []byte) (int, error) { return m.body.Write(p) }
func (m *memoryResponse) WriteHeader(status int)      { m.status = status }

// readAll reads a request's body (read whole already by the guard: see body).
func readAll(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) }

// bodyOf is a request body of data.
func bodyOf(data []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(data)) }
