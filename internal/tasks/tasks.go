// Package tasks keeps the records of the MCP Tasks extension (io.modelcontextprotocol/tasks,
// SEP-2663): a request answered with a task handle at once, whose state and final result a
// client polls with tasks/get. Records live in the server's store, so that any replica answers
// for a task and a task outlives the connection that started it.
package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// Extension is the extension's identifier, in capabilities and in a request's client capabilities.
const Extension = "io.modelcontextprotocol/tasks"

// Statuses of a task.
const (
	Working   = "working"
	Completed = "completed"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// keyPrefix prefixes a task's record key.
const keyPrefix = "task:"

// ErrUnknown is the error of a task id that names no task of the caller's.
var ErrUnknown = errors.New("no task of yours has this id (it may have expired)")

// Task is a task as the extension puts it on the wire (a DetailedTask: result or error once it
// ended).
type Task struct {
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          int64           `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          json.RawMessage `json:"error,omitempty"`
}

// Terminal reports whether the task has ended.
func (t Task) Terminal() bool { return t.Status != Working && t.Status != "input_required" }

// record is a task as stored: the task and whose it is.
type record struct {
	Owner string `json:"owner"`
	Task
}

// Store keeps task records in a store.KV for TTL each.
type Store struct {
	KV store.KV
	// TTL is how long a task is kept from its creation.
	TTL time.Duration
	// PollInterval is the polling interval suggested to clients.
	PollInterval time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

func (s *Store) now() string {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return now().UTC().Format(time.RFC3339Nano)
}

// Create records a new working task of owner, durably, and returns it.
func (s *Store) Create(ctx context.Context, owner, message string) (Task, error) {
	var id [16]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	now := s.now()
	r := record{Owner: owner, Task: Task{TaskID: hex.EncodeToString(id[:]), Status: Working, StatusMessage: message,
		CreatedAt: now, LastUpdatedAt: now, TTLMs: s.TTL.Milliseconds(), PollIntervalMs: s.PollInterval.Milliseconds()}}
	data, err := json.Marshal(r)
	if err != nil {
		return Task{}, fmt.Errorf("encode task: %w", err)
	}
	if _, err := s.KV.Create(ctx, keyPrefix+r.TaskID, data, s.TTL); err != nil {
		return Task{}, fmt.Errorf("record task: %w", err)
	}
	return r.Task, nil
}

// Get returns owner's task id.
func (s *Store) Get(ctx context.Context, owner, id string) (Task, error) {
	data, err := s.KV.Get(ctx, keyPrefix+id)
	if errors.Is(err, store.ErrNotFound) {
		return Task{}, ErrUnknown
	}
	if err != nil {
		return Task{}, fmt.Errorf("read task: %w", err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return Task{}, fmt.Errorf("decode task: %w", err)
	}
	if r.Owner != owner {
		return Task{}, ErrUnknown
	}
	return r.Task, nil
}

// Finish ends task id with the request's result, or its JSON-RPC error; a task that has ended
// already (cancelled) is left as it is.
func (s *Store) Finish(ctx context.Context, id string, result, rpcErr json.RawMessage) error {
	return s.update(ctx, "", id, func(t *Task) {
		t.Status, t.StatusMessage, t.Result, t.Error = Completed, "", result, nil
		if rpcErr != nil {
			t.Status, t.Result, t.Error = Failed, nil, rpcErr
		}
	})
}

// Cancel marks owner's task id cancelled, unless it has ended.
func (s *Store) Cancel(ctx context.Context, owner, id, message string) error {
	return s.update(ctx, owner, id, func(t *Task) { t.Status, t.StatusMessage = Cancelled, message })
}

// update changes a task that has not ended; owner "" matches any owner.
func (s *Store) update(ctx context.Context, owner, id string, change func(*Task)) error {
	_, err := s.KV.Update(ctx, keyPrefix+id, store.KeepTTL, func(old []byte) ([]byte, error) {
		if old == nil {
			return nil, ErrUnknown
		}
		var r record
		if err := json.Unmarshal(old, &r); err != nil {
			return nil, fmt.Errorf("decode task: %w", err)
		}
		if owner != "" && r.Owner != owner {
			return nil, ErrUnknown
		}
		if r.Terminal() {
			return old, nil
		}
		change(&r.Task)
		r.LastUpdatedAt = s.now()
		return json.Marshal(r)
	})
	return err
}
