package tools

import (
	"context"
	"sync"
	"time"
)

// Calls counts the tool calls under way, for a transport that must let them finish before it
// stops (stdio when its input ends). The zero value is ready to use.
type Calls struct {
	mu      sync.Mutex
	running int
	started int // ever, so that a wait can tell a call that started meanwhile
}

func (c *Calls) begin() {
	c.mu.Lock()
	c.running++
	c.started++
	c.mu.Unlock()
}

func (c *Calls) end() {
	c.mu.Lock()
	c.running--
	c.mu.Unlock()
}

func (c *Calls) state() (running, started int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running, c.started
}

// Wait returns once no call is under way and none has started for quiet (a request read just
// before may still be on its way to its handler), or when ctx ends.
func (c *Calls) Wait(ctx context.Context, quiet time.Duration) {
	tick := time.NewTicker(quiet / 4)
	defer tick.Stop()
	var lastStarted int
	var idleSince time.Time
	for {
		running, started := c.state()
		switch {
		case running > 0 || started != lastStarted:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = time.Now()
		case time.Since(idleSince) >= quiet:
			return
		}
		lastStarted = started
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
