package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// TestStore: a task is its owner's alone; it ends once (a cancelled task keeps its status when
// the work finishes after, and a finished one is not cancelled); a failed task carries the error.
func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name       string
		steps      func(s *Store, id string) error
		wantStatus string
	}{
		{"finished", func(s *Store, id string) error { return s.Finish(ctx, id, json.RawMessage(`{"content":[]}`), nil) }, Completed},
		{"failed", func(s *Store, id string) error { return s.Finish(ctx, id, nil, json.RawMessage(`{"code":-32603}`)) }, Failed},
		{"cancelled, then finished", func(s *Store, id string) error {
			if err := s.Cancel(ctx, "u1", id, "stop"); err != nil {
				return err
			}
			return s.Finish(ctx, id, json.RawMessage(`{}`), nil)
		}, Cancelled},
		{"finished, then cancelled", func(s *Store, id string) error {
			if err := s.Finish(ctx, id, json.RawMessage(`{}`), nil); err != nil {
				return err
			}
			return s.Cancel(ctx, "u1", id, "stop")
		}, Completed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &Store{KV: store.NewMemory(), TTL: time.Hour, PollInterval: time.Second}
			task, err := s.Create(ctx, "u1", "working")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "u2", task.TaskID); !errors.Is(err, ErrUnknown) {
				t.Errorf("another user's Get: %v", err)
			}
			if err := s.Cancel(ctx, "u2", task.TaskID, "x"); !errors.Is(err, ErrUnknown) {
				t.Errorf("another user's Cancel: %v", err)
			}
			if err := tt.steps(s, task.TaskID); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, "u1", task.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.wantStatus || (got.Status == Failed) != (got.Error != nil) || (got.Status == Completed) != (got.Result != nil) {
				t.Errorf("%+v", got)
			}
		})
	}
}
